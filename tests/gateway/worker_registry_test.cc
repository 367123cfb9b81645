// What a worker's Register must hold to join; the registry's traffic is covered end to end
// (tests/e2e).
#include "gateway/worker_registry.h"

#include <gtest/gtest.h>

#include <limits>

namespace pdserve::gateway {
namespace {

proto::Register Decode() {
  proto::Register r;
  r.set_role("decode");
  r.set_capacity_class("reserved");
  r.set_price_per_gpu_hour(2.5);
  r.set_gpu_count(1);
  r.set_kv_pages(512);
  r.set_page_size(16);
  r.set_max_context(4096);
  r.set_kv_endpoint("127.0.0.1:9000");
  r.set_model_id("tiny");
  r.set_layout_hash(42);
  return r;
}

TEST(WorkerRegistryTest, AcceptsAWellFormedWorker) {
  RegistryOptions o;
  o.model_id = "tiny";
  EXPECT_EQ(RegisterRefusal(Decode(), o), "");
  o.cluster_token = "secret";
  proto::Register r = Decode();
  r.set_cluster_token("secret");
  EXPECT_EQ(RegisterRefusal(r, o), "");
}

TEST(WorkerRegistryTest, RefusesFiguresNoWorkerCanHave) {
  RegistryOptions o;
  o.model_id = "tiny";
  struct Case {
    const char* what;
    void (*spoil)(proto::Register&);
    const char* says;
  };
  const Case cases[] = {
      {"token", [](proto::Register& r) { r.set_cluster_token("x"); }, ""},
      {"model", [](proto::Register& r) { r.set_model_id("other"); }, "serves model 'tiny'"},
      {"role", [](proto::Register& r) { r.set_role("both2"); }, "unknown role"},
      {"endpoint", [](proto::Register& r) { r.clear_kv_endpoint(); }, "KV endpoint"},
      {"class", [](proto::Register& r) { r.set_capacity_class("spot"); }, "capacity class"},
      {"price", [](proto::Register& r) { r.set_price_per_gpu_hour(-1); }, "finite number"},
      {"nan price",
       [](proto::Register& r) {
         r.set_price_per_gpu_hour(std::numeric_limits<double>::quiet_NaN());
       },
       "finite number"},
      {"inf price",
       [](proto::Register& r) {
         r.set_price_per_gpu_hour(std::numeric_limits<double>::infinity());
       },
       "finite number"},
      {"gpus", [](proto::Register& r) { r.set_gpu_count(0); }, "GPU count"},
      {"pages", [](proto::Register& r) { r.set_kv_pages(-5); }, "KV pages and page size"},
      {"page size", [](proto::Register& r) { r.set_page_size(0); }, "KV pages and page size"},
      {"context", [](proto::Register& r) { r.set_max_context(-1); }, "max context"},
  };
  for (const Case& c : cases) {
    proto::Register r = Decode();
    c.spoil(r);
    RegistryOptions with = o;
    if (std::string(c.what) == "token") with.cluster_token = "secret";
    const std::string why = RegisterRefusal(r, with);
    EXPECT_FALSE(why.empty()) << c.what;
    EXPECT_NE(why.find(c.says), std::string::npos) << c.what << ": " << why;
  }
}

}  // namespace
}  // namespace pdserve::gateway
