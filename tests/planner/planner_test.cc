// The planner's rules, one test each, on signals built here and a clock the test moves: steps of
// one within the burst maximum and the budget, cooldowns, no decision while workers start,
// scale-down only after a whole comfortable window and burst workers only, zero traffic back to
// the floor, up from zero, each pool alone, no flapping on a signal that flips, an idle burst
// worker let go at once, and each decision's cause.
#include "planner/planner.h"

#include <gtest/gtest.h>

#include <limits>

namespace pdserve::planner {
namespace {

using namespace std::chrono_literals;
using Clock = Planner::Clock;

PlannerOptions Options() {
  PlannerOptions o;
  o.ttft_slo_s = 2.0;
  o.itl_slo_s = 0.1;
  o.up_cooldown = 30s;
  o.down_hold = 120s;
  return o;
}

Planner TwoPools(int burst_max = 4, PlannerOptions o = Options()) {
  return Planner(o, {{Pool::kPrefill, {1, burst_max}}, {Pool::kDecode, {1, burst_max}}});
}

PoolSignals ShortPrefill() {
  PoolSignals s;
  s.reserved = 1;
  s.predicted_ttft_s = 3.5;
  return s;
}
PoolSignals Idle() {
  PoolSignals s;
  s.reserved = 1;
  return s;
}

TEST(PlannerTest, StartsAtTheFloorWithNoBurst) {
  Planner p = TwoPools();
  EXPECT_EQ(p.desired(Pool::kPrefill).reserved, 1);
  EXPECT_EQ(p.desired(Pool::kPrefill).burst, 0);
}

TEST(PlannerTest, AShortPoolGetsOneBurstWorkerPerCooldownUpToItsMaximum) {
  Planner p = TwoPools(/*burst_max=*/2);
  Clock::time_point t{};
  t += 1000s;
  auto d = p.Decide(t, {{Pool::kPrefill, ShortPrefill()}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].pool, Pool::kPrefill);
  EXPECT_EQ(d[0].capacity_class, CapacityClass::kBurst);
  EXPECT_EQ(d[0].delta, 1);
  EXPECT_NE(d[0].reason.find("predicted TTFT 3.50 s > SLO 2.00 s"), std::string::npos)
      << d[0].reason;
  EXPECT_TRUE(p.Decide(t + 10s, {{Pool::kPrefill, ShortPrefill()}}).empty()) << "cooling down";
  EXPECT_TRUE(p.Decide(t + 29s, {{Pool::kPrefill, ShortPrefill()}}).empty());
  EXPECT_EQ(p.Decide(t + 30s, {{Pool::kPrefill, ShortPrefill()}}).size(), 1u);
  EXPECT_TRUE(p.Decide(t + 60s, {{Pool::kPrefill, ShortPrefill()}}).empty()) << "at its maximum";
  EXPECT_EQ(p.desired(Pool::kPrefill).burst, 2);
  EXPECT_EQ(p.desired(Pool::kPrefill).reserved, 1);
}

// An infinite predicted wait (a pool whose workers take no prompt now) asks for the pool's
// maximum, not for a count that does not fit an int.
TEST(PlannerTest, AnInfiniteSignalAsksForThePoolsMaximum) {
  Planner p = TwoPools(/*burst_max=*/3);
  Clock::time_point t{};
  t += 1000s;
  PoolSignals s = ShortPrefill();
  s.predicted_ttft_s = std::numeric_limits<double>::infinity();
  auto d = p.Decide(t, {{Pool::kPrefill, s}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].delta, 3);
  EXPECT_EQ(p.desired(Pool::kPrefill).burst, 3);
  PoolSignals decode = Idle();
  decode.itl_s = 1e300;
  d = p.Decide(t, {{Pool::kDecode, decode}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].delta, 3);
}

TEST(PlannerTest, NoDecisionForAPoolWhileWorkersItAskedForStart) {
  Planner p = TwoPools();
  Clock::time_point t{};
  t += 1000s;
  PoolSignals s = ShortPrefill();
  s.starting = 1;
  EXPECT_TRUE(p.Decide(t, {{Pool::kPrefill, s}}).empty());
  EXPECT_TRUE(p.Decide(t + 600s, {{Pool::kPrefill, s}}).empty());
  s.starting = 0;
  EXPECT_EQ(p.Decide(t + 601s, {{Pool::kPrefill, s}}).size(), 1u);
}

TEST(PlannerTest, APromptHeavyLoadScalesPrefillOnlyAndADecodeHeavyOneDecodeOnly) {
  Planner p = TwoPools();
  Clock::time_point t{};
  t += 1000s;
  auto d = p.Decide(t, {{Pool::kPrefill, ShortPrefill()}, {Pool::kDecode, Idle()}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].pool, Pool::kPrefill);
  PoolSignals full = Idle();
  full.kv_use = 0.9;
  Planner q = TwoPools();
  d = q.Decide(t, {{Pool::kPrefill, Idle()}, {Pool::kDecode, full}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].pool, Pool::kDecode);
  EXPECT_NE(d[0].reason.find("KV use 90% > 85%"), std::string::npos) << d[0].reason;
  PoolSignals slow = Idle();
  slow.itl_s = 0.25;
  Planner r = TwoPools();
  d = r.Decide(t, {{Pool::kDecode, slow}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].reason.find("inter-token latency 0.250 s > SLO 0.100 s"), std::string::npos)
      << d[0].reason;
}

TEST(PlannerTest, ScalesDownOneBurstWorkerPerWholeComfortableWindow) {
  Planner p = TwoPools();
  Clock::time_point t{};
  t += 1000s;
  p.Decide(t, {{Pool::kPrefill, ShortPrefill()}});
  p.Decide(t + 30s, {{Pool::kPrefill, ShortPrefill()}});
  ASSERT_EQ(p.desired(Pool::kPrefill).burst, 2);
  // Comfortable from t+40: nothing before t+160 (a whole window, and the window after the last
  // step up); an interruption starts the window again.
  t += 40s;
  for (int s = 0; s < 100; s += 10) {
    EXPECT_TRUE(p.Decide(t + std::chrono::seconds(s), {{Pool::kPrefill, Idle()}}).empty()) << s;
  }
  PoolSignals busy = Idle();
  busy.predicted_ttft_s = 1.5;  // under the SLO, not comfortable (above half of it)
  EXPECT_TRUE(p.Decide(t + 100s, {{Pool::kPrefill, busy}}).empty());
  EXPECT_TRUE(p.Decide(t + 110s, {{Pool::kPrefill, Idle()}}).empty());
  EXPECT_TRUE(p.Decide(t + 229s, {{Pool::kPrefill, Idle()}}).empty());
  auto d = p.Decide(t + 230s, {{Pool::kPrefill, Idle()}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].delta, -1);
  EXPECT_EQ(d[0].capacity_class, CapacityClass::kBurst);
  EXPECT_EQ(d[0].reason, "comfortable for 120 s");
  EXPECT_TRUE(p.Decide(t + 300s, {{Pool::kPrefill, Idle()}}).empty()) << "one step a window";
  EXPECT_EQ(p.Decide(t + 350s, {{Pool::kPrefill, Idle()}}).size(), 1u);
  EXPECT_EQ(p.desired(Pool::kPrefill).burst, 0);
}

// A decode pool whose unloaded ITL (one sequence a step) is above down_ratio of the ITL SLO was
// never comfortable: its burst workers stayed for good. Comfort is judged above the unloaded ITL,
// and an SLO below twice it is not one more workers can meet.
TEST(PlannerTest, DecodeComfortIsJudgedAgainstTheUnloadedItl) {
  Planner p = TwoPools();  // ITL SLO 0.1 s, down_ratio 0.5
  Clock::time_point t{};
  t += 1000s;
  PoolSignals slow = Idle();
  slow.itl_s = 0.15;
  slow.unloaded_itl_s = 0.08;  // the SLO's half lies below what one sequence alone takes
  auto up = p.Decide(t, {{Pool::kDecode, slow}});
  ASSERT_EQ(up.size(), 0u) << "0.15 s is under twice the unloaded 0.08 s: more workers won't help";
  slow.itl_s = 0.2;
  up = p.Decide(t, {{Pool::kDecode, slow}});
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].cause, "itl");
  EXPECT_NE(up[0].reason.find("twice the unloaded 0.080 s"), std::string::npos) << up[0].reason;
  ASSERT_EQ(p.desired(Pool::kDecode).burst, 1);

  // The load gone, ITL back near the unloaded 0.08 s: comfortable (0.09 < 0.08 + 0.5 x 0.08), so
  // after a whole window the burst worker goes.
  PoolSignals calm = Idle();
  calm.burst = 1;
  calm.itl_s = 0.09;
  calm.unloaded_itl_s = 0.08;
  EXPECT_TRUE(p.Decide(t + 10s, {{Pool::kDecode, calm}}).empty());
  auto down = p.Decide(t + 130s, {{Pool::kDecode, calm}});
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].delta, -1);

  // Unloaded ITL well under the SLO: the old rule stands, scaled to the headroom above it.
  Planner q = TwoPools();
  PoolSignals fast = Idle();
  fast.unloaded_itl_s = 0.01;
  fast.itl_s = 0.06;  // above 0.01 + 0.5 x 0.09 = 0.055: not comfortable
  q.Decide(t, {{Pool::kDecode, [&] {
                  PoolSignals s = fast;
                  s.itl_s = 0.12;
                  return s;
                }()}});
  ASSERT_EQ(q.desired(Pool::kDecode).burst, 1);
  fast.burst = 1;
  EXPECT_TRUE(q.Decide(t + 10s, {{Pool::kDecode, fast}}).empty());
  EXPECT_TRUE(q.Decide(t + 200s, {{Pool::kDecode, fast}}).empty()) << "never comfortable at 0.06 s";
  fast.itl_s = 0.05;
  q.Decide(t + 210s, {{Pool::kDecode, fast}});
  EXPECT_EQ(q.Decide(t + 331s, {{Pool::kDecode, fast}}).size(), 1u);
}

TEST(PlannerTest, ZeroTrafficReturnsEveryPoolToItsFloorAndNoLower) {
  Planner p = TwoPools();
  Clock::time_point t{};
  t += 1000s;
  PoolSignals full = Idle();
  full.kv_use = 0.95;
  for (int i = 0; i < 4; ++i) {
    p.Decide(t + std::chrono::seconds(30 * i),
             {{Pool::kPrefill, ShortPrefill()}, {Pool::kDecode, full}});
  }
  ASSERT_EQ(p.desired(Pool::kPrefill).burst, 4);
  ASSERT_EQ(p.desired(Pool::kDecode).burst, 4);
  PoolSignals zero;  // no traffic: nothing predicted, nothing used, nothing queued
  zero.reserved = 1;
  for (int s = 0; s < 3600; s += 10) {
    for (const auto& d : p.Decide(t + 200s + std::chrono::seconds(s),
                                  {{Pool::kPrefill, zero}, {Pool::kDecode, zero}})) {
      EXPECT_EQ(d.delta, -1);
    }
  }
  for (Pool pool : {Pool::kPrefill, Pool::kDecode}) {
    EXPECT_EQ(p.desired(pool).burst, 0) << PoolName(pool);
    EXPECT_EQ(p.desired(pool).reserved, 1) << PoolName(pool);
  }
}

TEST(PlannerTest, RequestsWaitingWithNoWorkerScaleUpFromZero) {
  Planner p(Options(), {{Pool::kDecode, {/*reserved_floor=*/0, /*burst_max=*/3}}});
  EXPECT_EQ(p.desired(Pool::kDecode).reserved, 0);
  Clock::time_point t{};
  t += 1000s;
  PoolSignals none;  // no worker, so no KV use or latency to see: only the queue says
  none.queued_requests = 5;
  auto d = p.Decide(t, {{Pool::kDecode, none}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].delta, 1);
  EXPECT_EQ(d[0].reason, "5 requests wait and no worker runs");
  // And back to zero once nothing waits (its floor).
  PoolSignals idle;
  idle.burst = 1;
  for (int s = 0; s <= 300; s += 10)
    p.Decide(t + 30s + std::chrono::seconds(s), {{Pool::kDecode, idle}});
  EXPECT_EQ(p.desired(Pool::kDecode).burst, 0);
}

TEST(PlannerTest, TheWorkerBudgetCapsBothPoolsTogether) {
  PlannerOptions o = Options();
  o.worker_budget = 3;  // the two floors and one burst worker
  Planner p = TwoPools(4, o);
  Clock::time_point t{};
  t += 1000s;
  PoolSignals full = Idle();
  full.kv_use = 0.95;
  auto d = p.Decide(t, {{Pool::kPrefill, ShortPrefill()}, {Pool::kDecode, full}});
  ASSERT_EQ(d.size(), 1u) << "the budget held one of the two";
  EXPECT_TRUE(p.Decide(t + 60s, {{Pool::kPrefill, ShortPrefill()}, {Pool::kDecode, full}}).empty());
}

// A signal that flips between short and comfortable every interval for ten minutes: the pool
// steps up at most once per cooldown and never turns down (comfort never holds a whole window).
TEST(PlannerTest, AFlippingSignalDoesNotMakeThePoolFlap) {
  Planner p = TwoPools(/*burst_max=*/20);
  Clock::time_point t{};
  t += 1000s;
  int ups = 0, downs = 0;
  for (int s = 0; s < 600; s += 10) {
    const PoolSignals sig = (s / 10) % 2 ? Idle() : ShortPrefill();
    for (const auto& d : p.Decide(t + std::chrono::seconds(s), {{Pool::kPrefill, sig}})) {
      (d.delta > 0 ? ups : downs)++;
    }
  }
  EXPECT_EQ(downs, 0);
  EXPECT_LE(ups, 600 / 30);
  EXPECT_GE(ups, 1);
}

// After a step down, a brief shortage does not bring the worker straight back: up waits its
// cooldown after a down, so a pool changes direction at most once per load step.
TEST(PlannerTest, AStepUpRightAfterAStepDownWaitsItsCooldown) {
  Planner p = TwoPools();
  Clock::time_point t{};
  t += 1000s;
  p.Decide(t, {{Pool::kPrefill, ShortPrefill()}});
  for (int s = 10; s <= 140; s += 10)
    p.Decide(t + std::chrono::seconds(s), {{Pool::kPrefill, Idle()}});
  ASSERT_EQ(p.desired(Pool::kPrefill).burst, 0);  // stepped down at t+130
  EXPECT_TRUE(p.Decide(t + 145s, {{Pool::kPrefill, ShortPrefill()}}).empty());
  EXPECT_EQ(p.Decide(t + 160s, {{Pool::kPrefill, ShortPrefill()}}).size(), 1u);
}

// A burst worker that has had no request for burst_idle goes at once, without waiting for the
// comfortable window; not while the pool is short, and never with the rule off.
TEST(PlannerTest, AnIdleBurstWorkerGoesAtOnceWhenTheRuleIsOn) {
  PlannerOptions o = Options();
  o.burst_idle = 60s;
  Planner p = TwoPools(4, o);
  Clock::time_point t{};
  t += 1000s;
  ASSERT_EQ(p.Decide(t, {{Pool::kDecode,
                          [] {
                            PoolSignals s = Idle();
                            s.kv_use = 0.95;
                            return s;
                          }()}})[0]
                .cause,
            "kv_use");
  PoolSignals idle = Idle();
  idle.burst = 1;
  idle.burst_idle_s = 59;
  EXPECT_TRUE(p.Decide(t + 10s, {{Pool::kDecode, idle}}).empty()) << "not idle long enough";
  idle.burst_idle_s = 61;
  PoolSignals short_and_idle = idle;
  short_and_idle.itl_s = 0.15;  // 1.5 x the SLO over 2 workers: one more
  EXPECT_TRUE(p.Decide(t + 31s, {{Pool::kDecode, short_and_idle}}).size() == 1u &&
              p.desired(Pool::kDecode).burst == 2)
      << "a short pool steps up, idle worker or not";
  idle.burst = 2;
  auto d = p.Decide(t + 70s, {{Pool::kDecode, idle}});
  ASSERT_EQ(d.size(), 1u) << "long before the 120 s window of comfort";
  EXPECT_EQ(d[0].delta, -1);
  EXPECT_EQ(d[0].cause, "burst_idle");
  EXPECT_NE(d[0].reason.find("no request for 61 s"), std::string::npos) << d[0].reason;
  EXPECT_EQ(p.desired(Pool::kDecode).burst, 1);

  Planner off = TwoPools();  // burst_idle 0: only the window lets a worker go
  off.Decide(t, {{Pool::kDecode, short_and_idle}});
  idle.burst = 1;
  idle.burst_idle_s = 10000;
  EXPECT_TRUE(off.Decide(t + 70s, {{Pool::kDecode, idle}}).empty());
}

TEST(PlannerTest, EveryDecisionNamesItsRule) {
  Planner p = TwoPools();
  Clock::time_point t{};
  t += 1000s;
  PoolSignals nobody;
  nobody.queued_requests = 2;
  EXPECT_EQ(p.Decide(t, {{Pool::kPrefill, nobody}})[0].cause, "no_worker");
  EXPECT_EQ(p.Decide(t + 30s, {{Pool::kPrefill, ShortPrefill()}})[0].cause, "ttft");
  PoolSignals shed = Idle();  // admission refused what would have made the queue long
  shed.refused_requests = 3;
  shed.started_requests = 60;  // 3 of 63: a twentieth, not more
  EXPECT_TRUE(p.Decide(t + 60s, {{Pool::kPrefill, shed}}).empty());
  shed.started_requests = 50;
  const auto refused = p.Decide(t + 60s, {{Pool::kPrefill, shed}});
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].cause, "refused");
  EXPECT_NE(refused[0].reason.find("3 request(s) refused at admission"), std::string::npos);
  PoolSignals slow = Idle();
  slow.itl_s = 0.2;
  EXPECT_EQ(p.Decide(t, {{Pool::kDecode, slow}})[0].cause, "itl");
  std::string down;
  for (int s = 70; s <= 400 && down.empty(); s += 10) {
    for (const auto& d : p.Decide(t + std::chrono::seconds(s), {{Pool::kPrefill, Idle()}})) {
      down = d.cause;
    }
  }
  EXPECT_EQ(down, "comfortable");
}

// The step up is what the signal says is missing if the load spreads evenly: running workers x
// the signal over its target, less those running; for refusals, the demand admission shed over
// what it served. Within the burst maximum and the budget.
TEST(PlannerTest, AStepAddsTheWorkersTheSignalSaysAreMissing) {
  Clock::time_point t{};
  t += 1000s;
  Planner p = TwoPools(/*burst_max=*/5);
  PoolSignals slow = Idle();
  slow.burst = 1;
  slow.predicted_ttft_s = 4.4;  // 2.2 x the SLO on 2 workers: 5 needed
  auto d = p.Decide(t, {{Pool::kPrefill, slow}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].delta, 3);
  EXPECT_EQ(p.desired(Pool::kPrefill).burst, 3);

  Planner shed = TwoPools(/*burst_max=*/5);
  PoolSignals refused = Idle();
  refused.refused_requests = 20;
  refused.started_requests = 10;  // 3 x what one worker served
  d = shed.Decide(t, {{Pool::kPrefill, refused}});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].delta, 2);
  EXPECT_NE(d[0].reason.find("20 request(s) refused"), std::string::npos) << d[0].reason;

  Planner capped = TwoPools(/*burst_max=*/2);
  slow.predicted_ttft_s = 20;
  EXPECT_EQ(capped.Decide(t, {{Pool::kPrefill, slow}})[0].delta, 2) << "the burst maximum";
  PlannerOptions o = Options();
  o.worker_budget = 4;  // 2 reserved floors + 2
  Planner budget = TwoPools(5, o);
  EXPECT_EQ(budget.Decide(t, {{Pool::kPrefill, slow}})[0].delta, 2) << "the budget";
  PoolSignals kv = Idle();
  kv.kv_use = 0.9;  // just over 85%: one
  EXPECT_EQ(TwoPools().Decide(t, {{Pool::kDecode, kv}})[0].delta, 1);
}

// A pool whose queue is short only because its burst workers carry the load does not let one go:
// the prompts started lately would keep the rest busier than down_utilisation.
TEST(PlannerTest, ABusyPoolKeepsItsBurstWorkersWhateverItsPredictedWait) {
  Planner p = TwoPools();
  Clock::time_point t{};
  t += 1000s;
  PoolSignals busy = Idle();
  busy.burst = 2;
  ASSERT_EQ(p.Decide(t, {{Pool::kPrefill, ShortPrefill()}}).size(), 1u);
  p.Decide(t + 30s, {{Pool::kPrefill, ShortPrefill()}});
  ASSERT_EQ(p.desired(Pool::kPrefill).burst, 2);
  busy.utilisation = 0.5;  // on 3 workers; on 2 it would be 0.75
  for (int s = 40; s <= 600; s += 10) {
    EXPECT_TRUE(p.Decide(t + std::chrono::seconds(s), {{Pool::kPrefill, busy}}).empty()) << s;
  }
  busy.utilisation = 0.3;  // 0.45 on 2: one can go
  std::vector<Decision> down;
  for (int s = 610; s <= 900 && down.empty(); s += 10) {
    down = p.Decide(t + std::chrono::seconds(s), {{Pool::kPrefill, busy}});
  }
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].delta, -1);
}

}  // namespace
}  // namespace pdserve::planner
