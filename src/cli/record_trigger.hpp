// `record --mode flight --trigger COND`: watches the metrics of the programs being recorded and,
// each time a condition becomes true, snapshots that program's rings a moment later, so the trace
// holds the time around the crossing (docs/control.md, "Triggers").
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "collector/collector.hpp"
#include "metrics/snapshot.hpp"
#include "metrics/trigger.hpp"

namespace chronicle::cli {

struct TriggerOptions {
  std::vector<std::string> conditions;
  std::string after = "1s";   // how long after the crossing the snapshot is taken
  std::string window = "1s";  // what rates and quantiles cover
  double hysteresis = 0.1;
  unsigned limit = 10;  // snapshots at most, then the triggers only log
};

class TriggerWatcher {
 public:
  // Parses the conditions (std::invalid_argument on a bad one); `output` is the trace directory:
  // snapshots go to OUTPUT.triggers/trigger-N, and a log of what fired to OUTPUT.triggers/log.
  TriggerWatcher(const TriggerOptions& options, const std::string& output);
  ~TriggerWatcher();
  TriggerWatcher(const TriggerWatcher&) = delete;
  TriggerWatcher& operator=(const TriggerWatcher&) = delete;
  // Measures the programs' metrics (every 100 ms at most) and takes the snapshots that are due;
  // `sessions` are record's, by mapping path. A session that ended has its due snapshot taken now.
  void poll(const std::map<std::string, const collector::SessionMapping*>& sessions);
  // Snapshots still pending once every program ended are taken from what the mappings hold.
  void finish(const std::map<std::string, const collector::SessionMapping*>& sessions);
  unsigned fired() const { return fired_; }

 private:
  struct Watched;
  struct Pending {
    int pid = 0;
    unsigned number = 0;
    std::chrono::steady_clock::time_point due;
    std::string condition;
    double value = 0;
    uint64_t crossed_unix_ns = 0;
  };
  void observe(int pid, Watched& watched);
  void take(const Pending& pending, const collector::SessionMapping& mapping);
  void log(const std::string& line);

  TriggerOptions options_;
  std::vector<metrics::TriggerCondition> conditions_;
  std::chrono::nanoseconds after_;
  std::chrono::nanoseconds window_;
  std::string directory_;
  std::string log_;  // the log's lines so far: the file is written anew with each (one rule for files)
  std::map<int, std::unique_ptr<Watched>> watched_;  // by pid
  std::vector<Pending> pending_;
  std::chrono::steady_clock::time_point next_measure_{};
  unsigned fired_ = 0;
};

}  // namespace chronicle::cli
