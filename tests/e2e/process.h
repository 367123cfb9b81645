// The end-to-end tests' helpers, by part: pdserve processes and commands (pdserve_process.h),
// curl requests and SSE text (curl.h), a raw HTTP/1.1 connection (http_connection.h), a
// gateway's and its workers' /health and /metrics (serving_metrics.h), a started gateway and its
// fixture (gateway_fixture.h), and the `pdserve generate` reference (generate_reference.h).
// Loopback only; ports chosen by the OS.
#pragma once

#include "tests/e2e/curl.h"
#include "tests/e2e/gateway_fixture.h"
#include "tests/e2e/generate_reference.h"
#include "tests/e2e/http_connection.h"
#include "tests/e2e/pdserve_process.h"
#include "tests/e2e/serving_metrics.h"
