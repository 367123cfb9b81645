// scripts/check-layering against the source tree and against copies of it with a violation
// planted: an include up the folder table, the engine added to a library that must not link it,
// and code in a namespace other than its folder's.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace pdserve {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = PDSERVE_SOURCE_DIR;

struct ScriptRun {
  int exit_code;
  std::string out;  // stdout and stderr together
};

// scripts/check-layering on the tree at `root`, killed after 60 s (exit code 124 then).
ScriptRun CheckLayering(const fs::path& root) {
  const std::string cmd = "timeout 60 '" + (kSource / "scripts" / "check-layering").string() +
                          "' --root '" + root.string() + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string Trim(std::string s) {
  auto blank = [](unsigned char c) { return std::isspace(c) || c == '`'; };
  while (!s.empty() && blank(s.back())) s.pop_back();
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), [&](char c) { return !blank(c); }));
  return s;
}

std::vector<std::string> Cells(const std::string& row) {
  std::vector<std::string> cells;
  std::stringstream in(row.substr(row.find('|') + 1));
  std::string cell;
  while (std::getline(in, cell, '|')) cells.push_back(Trim(cell));
  if (!cells.empty() && cells.back().empty()) cells.pop_back();
  return cells;
}

// The folders of docs/architecture.md's table ("prefill_pool/, decode_pool/" is two).
std::vector<std::string> ListedFolders(const fs::path& doc) {
  std::vector<std::string> folders;
  std::stringstream in(ReadFile(doc));
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    const bool row = Trim(line).rfind('|', 0) == 0;
    if (!in_table) {
      const std::vector<std::string> header = {"folder", "what lives there", "may depend on"};
      in_table = row && Cells(line) == header;
      continue;
    }
    if (!row) break;
    const std::vector<std::string> cells = Cells(line);
    if (cells.empty() || cells[0].find("---") != std::string::npos) continue;
    std::stringstream names(cells[0]);
    std::string name;
    while (std::getline(names, name, ',')) {
      name = Trim(name);
      while (!name.empty() && name.back() == '/') name.pop_back();
      if (!name.empty()) folders.push_back(name);
    }
  }
  return folders;
}

// A copy of the source tree's table and listed folders (headers, .cc files and CMakeLists.txt)
// in a scratch folder of its own.
class CheckLayeringCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::path(PDSERVE_TEST_TMP) / (std::string("check_layering_") + test->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "docs");
    const fs::path doc = kSource / "docs" / "architecture.md";
    fs::copy_file(doc, root_ / "docs" / "architecture.md");
    for (const std::string& folder : ListedFolders(doc)) {
      if (folder == "tests" || folder == "docs") continue;
      CopySources(kSource / folder, root_ / folder);
    }
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(root_);
  }

  static void CopySources(const fs::path& from, const fs::path& to) {
    if (!fs::is_directory(from)) return;
    for (auto it = fs::recursive_directory_iterator(from); it != fs::recursive_directory_iterator();
         ++it) {
      const std::string name = it->path().filename().string();
      if (it->is_directory()) {
        if (name.rfind("build", 0) == 0 || name == "node_modules" || name[0] == '.')
          it.disable_recursion_pending();
        continue;
      }
      const std::string ext = it->path().extension().string();
      if (ext != ".h" && ext != ".cc" && name != "CMakeLists.txt") continue;
      const fs::path target = to / fs::relative(it->path(), from);
      fs::create_directories(target.parent_path());
      fs::copy_file(it->path(), target, fs::copy_options::overwrite_existing);
    }
  }

  fs::path root_;
};

// Holds only once the files have moved into the table's folders (the rooms issue).
TEST(CheckLayeringTest, SourceTreeFollowsTheTable) {
  const ScriptRun run = CheckLayering(kSource);
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("check-layering: OK"), std::string::npos) << run.out;
}

TEST_F(CheckLayeringCopyTest, IncludeUpTheTableFails) {
  const fs::path planted = root_ / "common" / "status.h";
  ASSERT_TRUE(fs::exists(planted));
  WriteFile(planted, "#include \"gateway/gateway_server.h\"\n" + ReadFile(planted));

  const ScriptRun run = CheckLayering(root_);
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_NE(run.out.find("common/status.h:1: folder common may not include "
                         "gateway/gateway_server.h"),
            std::string::npos)
      << run.out;
}

TEST_F(CheckLayeringCopyTest, EngineInALedgerOrGatewayLinkLineFails) {
  // The ledger once it has a folder of its own; the gateway before that.
  std::string library = "pdserve_ledger";
  fs::path cmake = root_ / "ledger" / "CMakeLists.txt";
  if (!fs::exists(cmake)) {
    library = "pdserve_gateway";
    cmake = root_ / "gateway" / "CMakeLists.txt";
  }
  ASSERT_TRUE(fs::exists(cmake));
  std::string text = ReadFile(cmake);
  const std::string call = "pdserve_library(" + library + " DEPS ";
  const size_t at = text.find(call);
  ASSERT_NE(at, std::string::npos) << text;
  text.insert(at + call.size(), "pdserve_model ");
  WriteFile(cmake, text);

  const ScriptRun run = CheckLayering(root_);
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_NE(run.out.find("library " + library + " may not reach pdserve_model"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find(fs::relative(cmake, root_).string() + ":"), std::string::npos) << run.out;
}

std::string Replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST_F(CheckLayeringCopyTest, CodeInAnotherFoldersNamespaceFails) {
  // The ledger's code back in the gateway's namespace, as it once was.
  const fs::path planted = root_ / "ledger" / "price_sheet.h";
  ASSERT_TRUE(fs::exists(planted));
  const std::string text = ReadFile(planted);
  ASSERT_NE(text.find("namespace pdserve::ledger {"), std::string::npos);
  WriteFile(planted, Replaced(text, "namespace pdserve::ledger {", "namespace pdserve::gateway {"));

  const ScriptRun run = CheckLayering(root_);
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_NE(run.out.find("ledger/price_sheet.h:"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("opens namespace pdserve::gateway, not pdserve::ledger"),
            std::string::npos)
      << run.out;
}

TEST_F(CheckLayeringCopyTest, AForwardDeclarationUpTheTableFails) {
  // Declaring a gateway type from common/ reaches up the table as an include would.
  const fs::path planted = root_ / "common" / "status.h";
  ASSERT_TRUE(fs::exists(planted));
  WriteFile(planted,
            ReadFile(planted) + "\nnamespace pdserve::gateway {\nclass GatewayServer;\n}\n");

  const ScriptRun run = CheckLayering(root_);
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_NE(run.out.find("common/status.h:"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("opens namespace pdserve::gateway, of no folder it may depend on"),
            std::string::npos)
      << run.out;
}

TEST_F(CheckLayeringCopyTest, ADeclarationOfAFolderBelowPasses) {
  // A gateway header may declare a router type it only points to.
  const fs::path planted = root_ / "gateway" / "gateway_metrics.h";
  ASSERT_TRUE(fs::exists(planted));
  const std::string text = ReadFile(planted);
  ASSERT_NE(text.find("namespace pdserve::router {"), std::string::npos);
  const ScriptRun run = CheckLayering(root_);
  EXPECT_EQ(run.exit_code, 0) << run.out;
}

TEST_F(CheckLayeringCopyTest, DocWithoutTheTableIsAnError) {
  WriteFile(root_ / "docs" / "architecture.md", "# pdserve\n\nNo folder table here.\n");
  const ScriptRun run = CheckLayering(root_);
  EXPECT_EQ(run.exit_code, 2) << run.out;
  EXPECT_NE(run.out.find("no table with the columns"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace pdserve
