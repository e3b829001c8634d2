// A session whose rings nobody drains while the program writes, for tests that need losses.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "chronicle/chronicle.hpp"
#include "collector/collector.hpp"
#include "reader/trace_reader.hpp"
#include "support.hpp"

namespace chronicle::test {

// A stream-mode session with no collector running: its rings (16 KiB, in 4 KiB packets) take
// their first packets and drop the rest, whatever the machine's speed. A session with a collector
// would lose events only while its writer outran the collector, which a slow writer (a sanitizer
// build, a loaded machine) does not. The trace is read from the mapping afterwards, as
// `chronicle snapshot` would after a crash, into DIRECTORY/trace.
template <typename Write>
reader::Trace record_with_no_collector(const TemporaryDirectory& directory, Write write) {
  Config config;
  config.shm_dir = directory.path();
  config.keep_shm = true;
  config.buffer_size = 16 << 10;
  config.packet_size = 4 << 10;
  config.self_stats_interval = std::chrono::milliseconds(0);
  EXPECT_TRUE(start(config)) << last_error();
  const std::string mapping_path = shm_path();
  write();
  stop();
  collector::SessionMapping mapping(mapping_path);
  collector::Collector collector(mapping, directory / "trace");
  collector.finish();
  return reader::Trace(directory / "trace");
}

}  // namespace chronicle::test
