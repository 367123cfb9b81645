// A self-signed TLS certificate and key for 127.0.0.1, for tests that serve or call HTTPS on
// loopback (the load generator's TLS test, the gateway's https upstreams). Test use only.
#pragma once

namespace pdserve::testing {

// A self-signed P-256 certificate for 127.0.0.1 (subjectAltName IP:127.0.0.1), valid to 2126,
// made with: openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes
//   -days 36500 -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1". Test use only.
inline constexpr char kLoopbackCert[] = R"(-----BEGIN CERTIFICATE-----
MIIBjzCCATagAwIBAgIUeg9XkUxTMcK4aCbGF6XsuKIOuq0wCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJMTI3LjAuMC4xMCAXDTI2MTEyOTE4NTMyMVoYDzIxMjYxMTA1
MTg1MzIxWjAUMRIwEAYDVQQDDAkxMjcuMC4wLjEwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAARsWfMEl7cNxTJtBfs/UEdF4bXspgMmzI+7oUh7VTSK69NUWEKjRZky
bfyHbjTh7tmxptZbwxprcsLb2CKoYH8oo2QwYjAdBgNVHQ4EFgQURg0uSMXQobiA
Ixw0Iulbto5hw9AwHwYDVR0jBBgwFoAURg0uSMXQobiAIxw0Iulbto5hw9AwDwYD
VR0TAQH/BAUwAwEB/zAPBgNVHREECDAGhwR/AAABMAoGCCqGSM49BAMCA0cAMEQC
IHy6wVtCdZGVtQRzOFLev4CmTkhlWKEeoR7IORx0X0ETAiAQp/EiDCJKBy3V5ffC
BJtwHFkJjUV+3GQiiOCJ0Zjl8w==
-----END CERTIFICATE-----
)";
inline constexpr char kLoopbackKey[] = R"(-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQguy0MJP8zSWINH4KU
devav8FXy1teR9IPZewWhAhD5S+hRANCAARsWfMEl7cNxTJtBfs/UEdF4bXspgMm
zI+7oUh7VTSK69NUWEKjRZkybfyHbjTh7tmxptZbwxprcsLb2CKoYH8o
-----END PRIVATE KEY-----
)";

}  // namespace pdserve::testing
