// https endpoints: the client verifies the server's certificate and host name (or not, when
// asked), and a failed handshake is a connect failure with its reason.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "bench/serve/fake_openai_server.h"
#include "bench/serve/load_generator.h"
#include "tests/loopback_certificate.h"

namespace pdserve::bench {
namespace {

using testing::kLoopbackCert;
using testing::kLoopbackKey;

std::vector<PreparedRequest> Requests(int n) {
  RandomDatasetOptions data;
  data.num_prompts = n;
  data.input_len = 8;
  data.output_len = 4;
  auto prompts = SampleRandomPrompts(data);
  EXPECT_TRUE(prompts.ok());
  auto requests = BuildRequests(*prompts, {.model = "fake"});
  EXPECT_TRUE(requests.ok());
  return std::move(requests).value();
}

class Tls : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeServerOptions options;
    options.tls_cert_pem = kLoopbackCert;
    options.tls_key_pem = kLoopbackKey;
    options.itl_s = 0.001;
    auto server = FakeOpenAiServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
    std::filesystem::create_directories(PDSERVE_TEST_TMP);
    // One file per process: ctest runs this fixture's tests in parallel processes.
    ca_file_ =
        std::string(PDSERVE_TEST_TMP) + "/tls_test_ca." + std::to_string(::getpid()) + ".pem";
    std::ofstream(ca_file_) << kLoopbackCert;
  }

  Result<LoadRun> Run(bool tls, bool verify, std::string ca_file, int n = 10) {
    auto target = ParseBaseUrl(std::string(tls ? "https" : "http") +
                               "://127.0.0.1:" + std::to_string(server_->port()));
    EXPECT_TRUE(target.ok());
    LoadOptions options;
    options.max_concurrency = 4;
    options.client.request_timeout_s = 5;
    options.client.tls_verify = verify;
    options.client.tls_ca_file = std::move(ca_file);
    requests_ = Requests(n);
    return RunLoad(*target, options, requests_);
  }

  std::unique_ptr<FakeOpenAiServer> server_;
  std::string ca_file_;
  std::vector<PreparedRequest> requests_;
};

TEST_F(Tls, VerifiedHttpsStreams) {
  auto run = Run(/*tls=*/true, /*verify=*/true, ca_file_);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  for (const RequestRecord& r : run->records) {
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.output_tokens, 4);
  }
  EXPECT_LE(run->connections_opened, 4);  // TLS connections are kept alive and reused
}

TEST_F(Tls, UntrustedCertificateIsAConnectFailureUnlessInsecure) {
  auto run = Run(/*tls=*/true, /*verify=*/true, "", 3);  // the system CAs do not know it
  ASSERT_TRUE(run.ok());
  for (const RequestRecord& r : run->records) {
    EXPECT_EQ(r.failure, FailureKind::kConnect);
    EXPECT_NE(r.error.find("TLS handshake"), std::string::npos) << r.error;
  }
  run = Run(/*tls=*/true, /*verify=*/false, "", 3);
  ASSERT_TRUE(run.ok());
  for (const RequestRecord& r : run->records) EXPECT_TRUE(r.success) << r.error;
}

TEST_F(Tls, PlainHttpToAnHttpsServerFailsCleanly) {
  auto run = Run(/*tls=*/false, /*verify=*/true, "", 3);
  ASSERT_TRUE(run.ok());
  for (const RequestRecord& r : run->records) {
    EXPECT_FALSE(r.success);
    EXPECT_FALSE(r.error.empty());
  }
}

TEST(TlsConfig, MissingCaFileIsAClearError) {
  auto target = ParseBaseUrl("https://127.0.0.1:1");
  ASSERT_TRUE(target.ok());
  EXPECT_TRUE(target->tls);
  LoadOptions options;
  options.client.tls_ca_file = "/nonexistent/ca.pem";
  std::vector<PreparedRequest> one(1);
  auto run = RunLoad(*target, options, one);
  EXPECT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("CA certificates"), std::string::npos);
}

TEST(BaseUrl, ParsesSchemesPortsAndPrefixes) {
  auto t = ParseBaseUrl("https://api.example.com/openai/");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->tls);
  EXPECT_EQ(t->host, "api.example.com");
  EXPECT_EQ(t->port, "443");
  EXPECT_EQ(t->path_prefix, "/openai");
  t = ParseBaseUrl("http://[::1]:8000");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->host, "::1");
  EXPECT_EQ(t->port, "8000");
  EXPECT_FALSE(t->tls);
  t = ParseBaseUrl("http://localhost");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->port, "80");
  EXPECT_FALSE(ParseBaseUrl("localhost:8000").ok());
  EXPECT_FALSE(ParseBaseUrl("http://:80").ok());
  EXPECT_FALSE(ParseBaseUrl("http://host:80x").ok());
  EXPECT_FALSE(ParseBaseUrl("http://[::1").ok());
}

}  // namespace
}  // namespace pdserve::bench
