// LedgerWriter: rows queued off the caller's thread, committed in batches, never dropped
// silently: a full buffer makes Append wait, a failing store keeps the batch, Close drains.
#include "ledger/ledger_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/fakes/fake_ledger.h"
#include "tests/ledger/ledger_test_support.h"

namespace pdserve::ledger {
namespace {

using test_support::Row;
using namespace std::chrono_literals;

TEST(LedgerWriterTest, RowsQueuedWhileABatchCommitsGoTogetherInTheNext) {
  auto store = std::make_shared<testing::FakeLedger>();
  LedgerWriter writer(store);
  store->Hold();
  writer.Append(Row("first", "t", 1));
  store->WaitForCalls(1);  // the first batch is being committed, held
  for (int i = 0; i < 50; ++i) writer.Append(Row("r" + std::to_string(i), "t", 2));
  EXPECT_EQ(writer.stats().buffered, 51u);
  store->Release();
  ASSERT_TRUE(writer.Flush(10s));
  EXPECT_EQ(store->batch_sizes(), (std::vector<size_t>{1, 50}));
  EXPECT_EQ(store->Rows({})->size(), 51u);
  const LedgerWriterStats s = writer.stats();
  EXPECT_EQ(s.rows_written, 51u);
  EXPECT_EQ(s.buffered, 0u);
  EXPECT_EQ(s.batches, 2u);
}

TEST(LedgerWriterTest, AFullBufferMakesAppendWaitForRoomAndLosesNothing) {
  auto store = std::make_shared<testing::FakeLedger>();
  LedgerWriterOptions options;
  options.capacity_rows = 4;
  options.batch_rows = 2;
  LedgerWriter writer(store, options);
  store->Hold();
  for (int i = 0; i < 4; ++i) writer.Append(Row("r" + std::to_string(i), "t", 1));
  std::atomic<bool> appended{false};
  std::thread late([&] {
    writer.Append(Row("late", "t", 2));
    appended = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(appended) << "Append returned with the buffer full";
  store->Release();
  late.join();
  ASSERT_TRUE(writer.Flush(10s));
  EXPECT_EQ(store->Rows({})->size(), 5u);
  EXPECT_EQ(writer.stats().full_waits, 1u);
  for (size_t n : store->batch_sizes()) EXPECT_LE(n, 2u);
}

TEST(LedgerWriterTest, AFailingStoreKeepsTheBatchAndItIsWrittenOnceItIsBack) {
  auto store = std::make_shared<testing::FakeLedger>();
  LedgerWriterOptions options;
  options.retry_after = 10ms;
  LedgerWriter writer(store, options);
  store->SetDown(true);
  for (int i = 0; i < 10; ++i) writer.Append(Row("r" + std::to_string(i), "t", i));
  store->WaitForCalls(3);
  EXPECT_FALSE(writer.Flush(50ms));
  EXPECT_EQ(writer.stats().buffered, 10u);
  EXPECT_GE(writer.stats().failed_batches, 2u);
  store->SetDown(false);
  ASSERT_TRUE(writer.Flush(10s));
  const auto rows = store->Rows({}).value();
  ASSERT_EQ(rows.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(rows[i].request_id, "r" + std::to_string(i));  // in order
}

TEST(LedgerWriterTest, CloseCommitsWhatIsQueuedAndLaterRowsAreWrittenAtOnce) {
  auto store = std::make_shared<testing::FakeLedger>();
  {
    LedgerWriter writer(store);
    store->Hold();
    for (int i = 0; i < 20; ++i) writer.Append(Row("r" + std::to_string(i), "t", i));
    std::thread release([&] {
      std::this_thread::sleep_for(50ms);
      store->Release();
    });
    writer.Close();
    release.join();
    EXPECT_EQ(store->Rows({})->size(), 20u);
    writer.Append(Row("after", "t", 30));  // on this thread, at once
    EXPECT_EQ(store->Rows({})->size(), 21u);
  }
}

TEST(LedgerWriterTest, CloseGivesUpOnAStoreThatStaysDownAfterItsDrainTime) {
  auto store = std::make_shared<testing::FakeLedger>();
  LedgerWriterOptions options;
  options.retry_after = 10ms;
  LedgerWriter writer(store, options);
  store->SetDown(true);
  writer.Append(Row("lost", "t", 1));
  const auto start = std::chrono::steady_clock::now();
  writer.Close(100ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_TRUE(store->Rows({})->empty());
}

TEST(LedgerWriterTest, DuplicatesAndRefusedRowsAreCountedAndTheRestWritten) {
  auto store = std::make_shared<testing::FakeLedger>();
  LedgerWriter writer(store);
  store->Refuse("bad");
  store->Hold();
  writer.Append(Row("a", "t", 1));
  store->WaitForCalls(1);
  writer.Append(Row("a", "t", 1));  // a duplicate of the held batch's row
  writer.Append(Row("bad", "t", 2));
  writer.Append(Row("b", "t", 3));
  store->Release();
  ASSERT_TRUE(writer.Flush(10s));
  const LedgerWriterStats s = writer.stats();
  EXPECT_EQ(s.rows_written, 2u);
  EXPECT_EQ(s.duplicates, 1u);
  EXPECT_EQ(s.rows_refused, 1u);
  EXPECT_EQ(store->Rows({})->size(), 2u);
}

TEST(LedgerWriterTest, APeriodsLatestStateIsTheOneWritten) {
  auto store = std::make_shared<testing::FakeLedger>();
  LedgerWriter writer(store);
  store->Hold();
  writer.Append(Row("a", "t", 1));
  store->WaitForCalls(1);
  WorkerPeriod p;
  p.period_id = "run-1";
  p.worker = test_support::Worker(1, CapacityClass::kReserved, 2.0);
  p.start_unix = 10;
  for (double end : {11.0, 12.0, 13.0}) {
    p.end_unix = end;
    writer.UpsertPeriod(p);
  }
  store->Release();
  ASSERT_TRUE(writer.Flush(10s));
  const auto periods = store->Periods({}, {}).value();
  ASSERT_EQ(periods.size(), 1u);
  EXPECT_EQ(periods[0].end_unix, 13.0);
}

}  // namespace
}  // namespace pdserve::ledger
