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

namespace pdserve::planner {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

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

Status KubernetesActuator::SetBurstWorkers(Pool pool, int count) {
  auto token = ReadFile(options_.token_file, "service account token");
  if (!token.ok()) return token.status();
  const std::string path = ScalePath(pool);
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

    http::request<http::string_body> request(http::verb::patch, path, 11);
    request.set(http::field::host, options_.api_host);
    request.set(http::field::authorization, "Bearer " + *token);
    request.set(http::field::content_type, "application/merge-patch+json");
    request.set(http::field::accept, "application/json");
    request.set(http::field::user_agent, "pdserve-planner");
    request.body() = nlohmann::json{{"spec", {{"replicas", count}}}}.dump();
    request.prepare_payload();
    http::write(stream, request);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1 << 20);
    http::read(stream, buffer, parser);
    const auto& response = parser.get();
    stream.shutdown(ec);  // the server may close without a TLS close_notify: not an error here
    const int code = static_cast<int>(response.result_int());
    if (code >= 200 && code < 300) return Status::Ok();
    // The API server answers errors with a Status object whose `message` says why.
    const auto body = nlohmann::json::parse(response.body(), nullptr, false);
    const std::string why =
        body.is_object() && body.contains("message") && body["message"].is_string()
            ? body["message"].get<std::string>()
            : response.body().substr(0, 200);
    const std::string text = "PATCH " + path + " answered " + std::to_string(code) + ": " + why;
    if (code == 401 || code == 403) return FailedPrecondition(text);
    if (code == 404) return NotFound(text);
    return Unavailable(text);
  } catch (const boost::system::system_error& e) {
    return Unavailable("PATCH https://" + options_.api_host + ":" +
                       std::to_string(options_.api_port) + path + ": " + e.what());
  }
}

}  // namespace pdserve::planner
