#include "planner/kubernetes_actuator.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <spdlog/spdlog.h>

#include "common/worker_name.h"

namespace pdserve::planner {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// The annotation the ReplicaSet controller reads when it picks pods to delete, lowest first
// (kubernetes.io/docs/reference/labels-annotations-taints/#pod-deletion-cost); unmarked pods
// count as 0.
constexpr const char* kDeletionCost = "controller.kubernetes.io/pod-deletion-cost";
constexpr int kLowestCost = -1000;

constexpr const char* kNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

Result<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) return FailedPrecondition(std::string("cannot read the ") + what + " " + path);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.empty()) return FailedPrecondition(std::string("the ") + what + " " + path + " is empty");
  return s;
}

bool IsIpAddress(const std::string& host) {
  boost::system::error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

Result<KubernetesActuatorOptions> KubernetesOptionsFromPod(std::string deployment_prefix) {
  KubernetesActuatorOptions o;
  o.deployment_prefix = std::move(deployment_prefix);
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0') {
    return FailedPrecondition(
        "KUBERNETES_SERVICE_HOST is not set: the kubernetes actuator runs in a pod");
  }
  o.api_host = host;
  if (port != nullptr && *port != '\0') o.api_port = std::atoi(port);
  auto ns = ReadFile(kNamespaceFile, "service account's namespace file");
  if (!ns.ok()) return ns.status();
  o.namespace_name = *ns;
  return o;
}

std::string KubernetesActuator::DeploymentName(Pool pool) const {
  return options_.deployment_prefix + "-" + PoolName(pool) + "-burst";
}

std::string KubernetesActuator::ScalePath(Pool pool) const {
  return "/apis/apps/v1/namespaces/" + options_.namespace_name + "/deployments/" +
         DeploymentName(pool) + "/scale";
}

std::string KubernetesActuator::Describe() const {
  return "kubernetes (https://" + options_.api_host + ":" + std::to_string(options_.api_port) +
         ", namespace " + options_.namespace_name + ", Deployments " + options_.deployment_prefix +
         "-{prefill,decode}-burst)";
}

Result<nlohmann::json> KubernetesActuator::Call(const std::string& method, const std::string& path,
                                                const std::string& body) const {
  auto token = ReadFile(options_.token_file, "service account token");
  if (!token.ok()) return token.status();
  try {
    asio::io_context io;
    asio::ssl::context tls(asio::ssl::context::tls_client);
    tls.set_options(asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
    boost::system::error_code ec;
    tls.load_verify_file(options_.ca_file, ec);
    if (ec) {
      return FailedPrecondition("cannot load the cluster's CA " + options_.ca_file + ": " +
                                ec.message());
    }
    beast::ssl_stream<beast::tcp_stream> stream(io, tls);
    stream.set_verify_mode(asio::ssl::verify_peer);
    stream.set_verify_callback(asio::ssl::host_name_verification(options_.api_host));
    if (!IsIpAddress(options_.api_host) &&
        !SSL_set_tlsext_host_name(stream.native_handle(), options_.api_host.c_str())) {
      return Internal("cannot set the TLS server name");
    }
    beast::get_lowest_layer(stream).expires_after(options_.timeout);
    asio::ip::tcp::resolver resolver(io);
    beast::get_lowest_layer(stream).connect(
        resolver.resolve(options_.api_host, std::to_string(options_.api_port)));
    stream.handshake(asio::ssl::stream_base::client);

    http::request<http::string_body> request(http::string_to_verb(method), path, 11);
    request.set(http::field::host, options_.api_host);
    request.set(http::field::authorization, "Bearer " + *token);
    if (!body.empty()) request.set(http::field::content_type, "application/merge-patch+json");
    request.set(http::field::accept, "application/json");
    request.set(http::field::user_agent, "pdserve-planner");
    request.body() = body;
    request.prepare_payload();
    http::write(stream, request);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1 << 20);
    http::read(stream, buffer, parser);
    const auto& response = parser.get();
    stream.shutdown(ec);  // the server may close without a TLS close_notify: not an error here
    const int code = static_cast<int>(response.result_int());
    const auto answer = nlohmann::json::parse(response.body(), nullptr, false);
    if (code >= 200 && code < 300) {
      return answer.is_discarded() ? nlohmann::json::object() : answer;
    }
    // The API server answers errors with a Status object whose `message` says why.
    const std::string why =
        answer.is_object() && answer.contains("message") && answer["message"].is_string()
            ? answer["message"].get<std::string>()
            : response.body().substr(0, 200);
    const std::string text = method + " " + path + " answered " + std::to_string(code) + ": " + why;
    if (code == 401 || code == 403) return FailedPrecondition(text);
    if (code == 404) return NotFound(text);
    return Unavailable(text);
  } catch (const boost::system::system_error& e) {
    return Unavailable(method + " https://" + options_.api_host + ":" +
                       std::to_string(options_.api_port) + path + ": " + e.what());
  }
}

void KubernetesActuator::MarkForDeletion(Pool pool, int count) {
  const auto names = drain_order_.find(pool);
  if (names == drain_order_.end() || names->second.empty()) return;
  auto scale = Call("GET", ScalePath(pool), "");
  if (!scale.ok()) {
    spdlog::warn("kubernetes: cannot read {}'s scale ({}); the newest pods go",
                 DeploymentName(pool), scale.status().ToString());
    return;
  }
  const auto& replicas = (*scale)["spec"]["replicas"];
  const int current = replicas.is_number_integer() ? replicas.get<int>() : 0;
  // The pods to go, idlest first, at the lowest costs: the ReplicaSet controller deletes the
  // pods of lowest pod-deletion-cost first.
  const int going = std::min<int>(current - count, static_cast<int>(names->second.size()));
  for (int i = 0; i < going; ++i) {
    const std::string& name = names->second[static_cast<size_t>(i)];
    const auto parts = ParseWorkerName(name);
    const std::string pod = parts ? parts->host : name;  // a pod's hostname is its name
    const nlohmann::json patch = {
        {"metadata", {{"annotations", {{kDeletionCost, std::to_string(kLowestCost + i)}}}}}};
    auto marked = Call("PATCH", PodPath(pod), patch.dump());
    if (!marked.ok()) {
      spdlog::warn("kubernetes: cannot mark pod {} to go first ({}); the ReplicaSet picks", pod,
                   marked.status().ToString());
    }
  }
}

Status KubernetesActuator::SetBurstWorkers(Pool pool, int count) {
  MarkForDeletion(pool, count);
  auto scaled =
      Call("PATCH", ScalePath(pool), nlohmann::json{{"spec", {{"replicas", count}}}}.dump());
  return scaled.ok() ? Status::Ok() : scaled.status();
}

void KubernetesActuator::SetDrainOrder(Pool pool, std::vector<std::string> names) {
  drain_order_[pool] = std::move(names);
}

std::string KubernetesActuator::PodPath(const std::string& pod) const {
  return "/api/v1/namespaces/" + options_.namespace_name + "/pods/" + pod;
}

}  // namespace pdserve::planner
