// KubernetesActuator against a local HTTPS stand-in of the API server: a certificate from a test
// CA made here with the openssl tool, the bearer token checked, the scale subresource PATCHed
// with a JSON merge patch. The actuator must send exactly that, refuse a server its CA did not
// sign, and turn the server's refusals (401, 404) into errors that carry the server's message.
#include "planner/kubernetes_actuator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/planner/fake_programs.h"

namespace pdserve::planner {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

constexpr const char* kToken = "test-service-account-token";

// A CA and a certificate for 127.0.0.1 and localhost that it signed, in `dir`: ca.crt,
// server.crt, server.key; elsewhere.crt and elsewhere.key, signed by the same CA for another name
// only; and other-ca.crt, a CA that signed nothing here. False when the openssl tool failed.
bool MakeCertificates(const testing::TempDir& dir) {
  const std::string d = dir.path();
  const std::string script =
      "set -e; cd " + d +
      "; key='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'"
      "; openssl req -x509 $key -keyout ca.key -out ca.crt -days 2 -subj /CN=pdserve-test-ca"
      "; openssl req -x509 $key -keyout other-ca.key -out other-ca.crt -days 2 "
      "-subj /CN=pdserve-other-ca"
      "; openssl req $key -keyout server.key -out server.csr -subj /CN=localhost"
      "; echo 'subjectAltName=IP:127.0.0.1,DNS:localhost' > san.ext"
      "; openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
      "-out server.crt -days 2 -extfile san.ext"
      "; openssl req $key -keyout elsewhere.key -out elsewhere.csr -subj /CN=elsewhere.example"
      "; echo 'subjectAltName=DNS:elsewhere.example' > elsewhere.ext"
      "; openssl x509 -req -in elsewhere.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
      "-out elsewhere.crt -days 2 -extfile elsewhere.ext";
  return std::system(("(" + script + ") > " + d + "/openssl.log 2>&1").c_str()) == 0;
}

// The API server's stand-in: serves one request per connection until destroyed. Deployments it
// knows: pdserve-prefill-burst and pdserve-decode-burst in namespace "serving".
class ApiServerStandIn {
 public:
  struct Seen {
    std::string method, target, authorization, content_type, body;
  };

  // `certificate`: NAME.crt and NAME.key in `dir`.
  explicit ApiServerStandIn(const testing::TempDir& dir, const std::string& certificate = "server")
      : tls_(asio::ssl::context::tls_server),
        acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    tls_.use_certificate_chain_file(dir / (certificate + ".crt"));
    tls_.use_private_key_file(dir / (certificate + ".key"), asio::ssl::context::pem);
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { Serve(); });
  }
  ~ApiServerStandIn() {
    stop_ = true;
    try {  // wake the accept
      asio::ip::tcp::socket s(io_);
      s.connect({asio::ip::make_address("127.0.0.1"), port_});
    } catch (...) {
    }
    thread_.join();
  }
  int port() const { return port_; }
  std::vector<Seen> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  int handshake_failures() const { return handshake_failures_; }

 private:
  void Serve() {
    while (!stop_) {
      asio::ip::tcp::socket socket(io_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || stop_) continue;
      try {
        beast::ssl_stream<asio::ip::tcp::socket> stream(std::move(socket), tls_);
        stream.handshake(asio::ssl::stream_base::server, ec);
        if (ec) {
          ++handshake_failures_;
          continue;
        }
        beast::flat_buffer buffer;
        http::request<http::string_body> request;
        http::read(stream, buffer, request);
        Seen s{std::string(request.method_string()), std::string(request.target()),
               std::string(request[http::field::authorization]),
               std::string(request[http::field::content_type]), request.body()};
        {
          std::lock_guard lock(mu_);
          seen_.push_back(s);
        }
        http::response<http::string_body> response = Answer(s);
        response.prepare_payload();
        http::write(stream, response);
        stream.shutdown(ec);
      } catch (const std::exception&) {
      }
    }
  }

  http::response<http::string_body> Answer(const Seen& s) {
    auto status = [](http::status code, const std::string& message) {
      http::response<http::string_body> r(code, 11);
      r.set(http::field::content_type, "application/json");
      r.body() =
          nlohmann::json{{"kind", "Status"}, {"status", "Failure"}, {"message", message}}.dump();
      return r;
    };
    if (s.authorization != std::string("Bearer ") + kToken) {
      return status(http::status::unauthorized, "Unauthorized");
    }
    const std::string pods = "/api/v1/namespaces/serving/pods/";
    if (s.target.rfind(pods, 0) == 0 && s.method == "PATCH") {
      const std::string pod = s.target.substr(pods.size());
      if (pod.rfind("pdserve-decode-burst-", 0) != 0) {
        return status(http::status::not_found, "pods \"" + pod + "\" not found");
      }
      http::response<http::string_body> r(http::status::ok, 11);
      r.set(http::field::content_type, "application/json");
      r.body() = nlohmann::json{{"kind", "Pod"}, {"metadata", {{"name", pod}}}}.dump();
      return r;
    }
    const std::string prefix = "/apis/apps/v1/namespaces/serving/deployments/";
    const std::string name =
        s.target.rfind(prefix, 0) == 0 && s.target.ends_with("/scale")
            ? s.target.substr(prefix.size(), s.target.size() - prefix.size() - 6)
            : "";
    if (name != "pdserve-prefill-burst" && name != "pdserve-decode-burst") {
      return status(http::status::not_found, "deployments.apps \"" + name + "\" not found");
    }
    int replicas = 0;
    {
      std::lock_guard lock(mu_);
      if (s.method == "PATCH") {
        const auto patch = nlohmann::json::parse(s.body, nullptr, false);
        replicas_[name] = patch["spec"]["replicas"].get<int>();
      }
      replicas = replicas_[name];
    }
    http::response<http::string_body> r(http::status::ok, 11);
    r.set(http::field::content_type, "application/json");
    r.body() = nlohmann::json{{"kind", "Scale"},
                              {"apiVersion", "autoscaling/v1"},
                              {"metadata", {{"name", name}, {"namespace", "serving"}}},
                              {"spec", {{"replicas", replicas}}}}
                   .dump();
    return r;
  }

  asio::io_context io_;
  asio::ssl::context tls_;
  asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> handshake_failures_{0};
  std::mutex mu_;
  std::vector<Seen> seen_;
  std::map<std::string, int> replicas_;  // by Deployment
  std::thread thread_;
};

struct KubernetesActuatorTest : ::testing::Test {
  void SetUp() override {
    ASSERT_TRUE(MakeCertificates(dir)) << testing::ReadText(dir / "openssl.log");
    std::ofstream(dir / "token") << kToken << "\n";
    server = std::make_unique<ApiServerStandIn>(dir);
    options.api_host = "127.0.0.1";
    options.api_port = server->port();
    options.token_file = dir / "token";
    options.ca_file = dir / "ca.crt";
    options.namespace_name = "serving";
  }
  testing::TempDir dir;
  std::unique_ptr<ApiServerStandIn> server;
  KubernetesActuatorOptions options;
};

TEST_F(KubernetesActuatorTest, PatchesTheScaleSubresourceOfThePoolsBurstDeployment) {
  KubernetesActuator actuator(options);
  const Status s = actuator.SetBurstWorkers(Pool::kDecode, 3);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kPrefill, 0).ok());
  const auto seen = server->seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "PATCH");
  EXPECT_EQ(seen[0].target,
            "/apis/apps/v1/namespaces/serving/deployments/pdserve-decode-burst/scale");
  EXPECT_EQ(seen[0].content_type, "application/merge-patch+json");
  EXPECT_EQ(seen[0].authorization, std::string("Bearer ") + kToken);
  EXPECT_EQ(nlohmann::json::parse(seen[0].body),
            nlohmann::json::parse(R"({"spec":{"replicas":3}})"));
  EXPECT_EQ(seen[1].target,
            "/apis/apps/v1/namespaces/serving/deployments/pdserve-prefill-burst/scale");
  EXPECT_EQ(nlohmann::json::parse(seen[1].body)["spec"]["replicas"], 0);
}

// Going down with a drain order, the idlest workers' pods (their hosts) are marked with the
// lowest pod-deletion-cost before the scale, as many as go; a pod that cannot be marked leaves
// the choice to the ReplicaSet, and the scale goes on.
TEST_F(KubernetesActuatorTest, ThePodsToGoAreMarkedWithTheLowestDeletionCostFirst) {
  KubernetesActuator actuator(options);
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 3).ok());
  actuator.SetDrainOrder(Pool::kDecode, {"pdserve-decode-burst-b:1", "pdserve-decode-burst-a:1",
                                         "pdserve-decode-burst-c:1"});
  const Status down = actuator.SetBurstWorkers(Pool::kDecode, 1);
  ASSERT_TRUE(down.ok()) << down.ToString();
  auto seen = server->seen();
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen[1].method, "GET");
  EXPECT_EQ(seen[1].target,
            "/apis/apps/v1/namespaces/serving/deployments/pdserve-decode-burst/scale");
  EXPECT_EQ(seen[2].method, "PATCH");
  EXPECT_EQ(seen[2].target, "/api/v1/namespaces/serving/pods/pdserve-decode-burst-b");
  EXPECT_EQ(seen[2].content_type, "application/merge-patch+json");
  EXPECT_EQ(nlohmann::json::parse(seen[2].body),
            nlohmann::json::parse(R"({"metadata":{"annotations":{
              "controller.kubernetes.io/pod-deletion-cost":"-1000"}}})"));
  EXPECT_EQ(seen[3].target, "/api/v1/namespaces/serving/pods/pdserve-decode-burst-a");
  EXPECT_EQ(
      nlohmann::json::parse(
          seen[3].body)["metadata"]["annotations"]["controller.kubernetes.io/pod-deletion-cost"],
      "-999");
  EXPECT_EQ(nlohmann::json::parse(seen[4].body)["spec"]["replicas"], 1);

  // Up: nothing marked. A pod not found: the scale still goes down.
  actuator.SetDrainOrder(Pool::kDecode, {"gone-pod:7"});
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 2).ok());
  EXPECT_EQ(server->seen().size(), 7u) << "a GET and the scale";
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 1).ok());
  seen = server->seen();
  ASSERT_EQ(seen.size(), 10u);
  EXPECT_EQ(seen[8].target, "/api/v1/namespaces/serving/pods/gone-pod");
  EXPECT_EQ(nlohmann::json::parse(seen[9].body)["spec"]["replicas"], 1);
}

TEST_F(KubernetesActuatorTest, TheTokenIsReadAgainForEveryCall) {
  KubernetesActuator actuator(options);
  std::ofstream(dir / "token") << "an-expired-token\n";
  const Status refused = actuator.SetBurstWorkers(Pool::kDecode, 1);
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("answered 401: Unauthorized"), std::string::npos)
      << refused.ToString();
  std::ofstream(dir / "token") << kToken << "\n";  // the kubelet rotated it
  EXPECT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 1).ok());
}

TEST_F(KubernetesActuatorTest, AServerTheClustersCaDidNotSignIsRefused) {
  options.ca_file = dir / "other-ca.crt";
  KubernetesActuator actuator(options);
  const Status s = actuator.SetBurstWorkers(Pool::kDecode, 2);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("certificate verify failed"), std::string::npos) << s.ToString();
  EXPECT_TRUE(server->seen().empty()) << "no request may reach an unverified server";
}

TEST_F(KubernetesActuatorTest, ACertificateForAnotherNameIsRefused) {
  options.api_host = "localhost";  // the certificate names it: accepted
  EXPECT_TRUE(KubernetesActuator(options).SetBurstWorkers(Pool::kDecode, 1).ok());
  // The cluster's CA signed this one too, but for elsewhere.example only.
  ApiServerStandIn elsewhere(dir, "elsewhere");
  options.api_port = elsewhere.port();
  const Status s = KubernetesActuator(options).SetBurstWorkers(Pool::kDecode, 1);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("certificate verify failed"), std::string::npos) << s.ToString();
  EXPECT_TRUE(elsewhere.seen().empty());
}

TEST_F(KubernetesActuatorTest, AMissingDeploymentIsNotFoundWithTheServersMessage) {
  options.deployment_prefix = "other";
  KubernetesActuator actuator(options);
  const Status s = actuator.SetBurstWorkers(Pool::kDecode, 1);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("deployments.apps \"other-decode-burst\" not found"),
            std::string::npos)
      << s.ToString();
}

TEST_F(KubernetesActuatorTest, AMissingTokenFileIsAClearError) {
  options.token_file = dir / "no-such-token";
  const Status s = KubernetesActuator(options).SetBurstWorkers(Pool::kDecode, 1);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("no-such-token"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace pdserve::planner
