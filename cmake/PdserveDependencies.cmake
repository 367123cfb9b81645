# Finds the libraries pdserve builds on. All come from Debian's packages (scripts/setup installs
# them); CUDA and NCCL are optional.
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(ICU REQUIRED COMPONENTS uc)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(ISAL REQUIRED IMPORTED_TARGET libisal)  # Intel ISA-L: CRC32C of KV chunks
pkg_check_modules(LIBPQ REQUIRED IMPORTED_TARGET libpq)  # the PostgreSQL ledger (ledger/postgres_ledger.h)
find_package(Boost 1.74 REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(prometheus-cpp REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(GTest REQUIRED)
