// W3C Trace Context: parsing and writing the headers, and making ids. Section names in the
// comments are those of the W3C Trace Context Recommendation (Level 1).
#include "chronicle/context.hpp"

#include <pthread.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

namespace chronicle {

namespace {

constexpr size_t kVersion00Length = 55;  // "00-" 32 "-" 16 "-" 2
constexpr size_t kTraceIdAt = 3;
constexpr size_t kSpanIdAt = 36;
constexpr size_t kFlagsAt = 53;

// HEXDIGLC: digits and lowercase a-f only ("traceparent Header Field Values").
int lowercase_hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Decodes `out.size()` bytes of HEXDIGLC; false on any other character.
template <size_t N>
bool decode_hex(std::string_view text, std::array<uint8_t, N>& out) {
  for (size_t i = 0; i < N; ++i) {
    const int high = lowercase_hex_value(text[2 * i]);
    const int low = lowercase_hex_value(text[2 * i + 1]);
    if (high < 0 || low < 0) return false;
    out[i] = static_cast<uint8_t>(high << 4 | low);
  }
  return true;
}

template <size_t N>
bool all_zero(const std::array<uint8_t, N>& bytes) {
  for (uint8_t byte : bytes)
    if (byte) return false;
  return true;
}

void append_hex(std::string& out, const uint8_t* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (size_t i = 0; i < size; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 0xf];
  }
}

bool is_ows(char c) {
  return c == ' ' || c == '\t';
}

// An HTTP field value does not include the whitespace around it (RFC 7230 §3.2.4, which the
// specification's headers are carried in), so a header handed over with it is read without it.
std::string_view trim_ows(std::string_view text) {
  while (!text.empty() && is_ows(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_ows(text.back())) text.remove_suffix(1);
  return text;
}

// "Versioning of traceparent": version 00 is exactly 55 characters. A higher version is read as
// far as the fields 00 defines, which must each be followed by a dash (or, for the flags, by
// the end); what follows is not parsed ("Vendors MUST NOT parse or assume anything about
// unknown fields").
std::string_view check_layout(std::string_view header, bool version00) {
  if (header.size() < kVersion00Length) return "shorter than the 55 characters of the version-format";
  if (header[kTraceIdAt - 1] != '-') return "no '-' after the version";
  if (header[kSpanIdAt - 1] != '-') return "trace-id is not 32 characters followed by '-'";
  if (header[kFlagsAt - 1] != '-') return "parent-id is not 16 characters followed by '-'";
  if (version00 && header.size() > kVersion00Length) return "version 00 has more than 55 characters";
  if (header.size() > kVersion00Length && header[kVersion00Length] != '-')
    return "trace-flags are not 2 characters followed by '-' or the end";
  return {};
}

std::string_view parse_traceparent(std::string_view header, TraceContext& context) {
  header = trim_ows(header);
  if (header.size() < 2) return "no version";
  std::array<uint8_t, 1> version{};
  // "version": 2HEXDIGLC; version ff is invalid.
  if (!decode_hex(header, version)) return "version is not 2 lowercase hex digits";
  if (version[0] == 0xff) return "version ff is invalid";
  if (std::string_view why = check_layout(header, version[0] == 0); !why.empty()) return why;
  if (!decode_hex(header.substr(kTraceIdAt), context.trace_id)) return "trace-id is not lowercase hex";
  if (all_zero(context.trace_id)) return "trace-id is all zeros";
  if (!decode_hex(header.substr(kSpanIdAt), context.span_id)) return "parent-id is not lowercase hex";
  if (all_zero(context.span_id)) return "parent-id is all zeros";
  std::array<uint8_t, 1> flags{};
  if (!decode_hex(header.substr(kFlagsAt), flags)) return "trace-flags are not lowercase hex";
  // Flag bits this version does not define are kept as received: a parsed context writes back
  // the header it came from; child() clears them for what this process sends on.
  context.flags = flags[0];
  return {};
}

// "Key": simple-key = lcalpha 0*255( lcalpha / DIGIT / "_" / "-" / "*" / "/" ); multi-tenant-key =
// tenant-id "@" system-id, tenant-id = ( lcalpha / DIGIT ) 0*240( same ), system-id = lcalpha
// 0*13( same ).
bool is_key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*' || c == '/';
}

bool is_key_part(std::string_view part, size_t max_length, bool digit_first) {
  if (part.empty() || part.size() > max_length) return false;
  const char first = part.front();
  if (!(first >= 'a' && first <= 'z') && !(digit_first && first >= '0' && first <= '9')) return false;
  for (char c : part)
    if (!is_key_char(c)) return false;
  return true;
}

bool is_tracestate_key(std::string_view key) {
  const size_t at = key.find('@');
  if (at == std::string_view::npos) return is_key_part(key, 256, false);
  return is_key_part(key.substr(0, at), 241, true) && is_key_part(key.substr(at + 1), 14, false);
}

// "Value": value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr; nblk-chr = printable ASCII but
// ',' and '='.
bool is_tracestate_value(std::string_view value) {
  if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
  for (char c : value)
    if (c < 0x20 || c > 0x7e || c == ',' || c == '=') return false;
  return true;
}

// Splits a list into its non-empty members without their surrounding whitespace ("list":
// empty and whitespace-only members are allowed), or sets `why`.
std::vector<std::string_view> tracestate_members(std::string_view list, std::string& why) {
  std::vector<std::string_view> members;
  while (true) {
    const size_t comma = list.find(',');
    const std::string_view member = trim_ows(list.substr(0, comma));
    if (!member.empty()) {
      const size_t equals = member.find('=');
      if (equals == std::string_view::npos) {
        why = "a list-member has no '='";
      } else if (!is_tracestate_key(member.substr(0, equals))) {
        why = "a key breaks the key grammar";
      } else if (!is_tracestate_value(member.substr(equals + 1))) {
        why = "a value breaks the value grammar";
      } else {
        for (std::string_view other : members)
          if (other.substr(0, other.find('=') + 1) == member.substr(0, equals + 1)) why = "a key appears twice";
      }
      if (!why.empty()) return {};
      members.push_back(member);
    }
    if (comma == std::string_view::npos) return members;
    list.remove_prefix(comma + 1);
  }
}

// "tracestate Limits": vendors SHOULD propagate at least 512 characters; to fit, whole entries
// are left out, those longer than 128 characters first, then from the end.
std::string fit_tracestate(std::vector<std::string_view> members, std::string& note) {
  constexpr size_t kMaxLength = 512;
  constexpr size_t kLongEntry = 128;
  auto joined_length = [&] {
    size_t length = members.empty() ? 0 : members.size() - 1;
    for (std::string_view member : members) length += member.size();
    return length;
  };
  size_t left_out = 0;
  for (size_t i = members.size(); i-- > 0 && joined_length() > kMaxLength;) {
    if (members[i].size() > kLongEntry) members.erase(members.begin() + i), ++left_out;
  }
  while (joined_length() > kMaxLength) members.pop_back(), ++left_out;
  std::string joined;
  for (std::string_view member : members) {
    if (!joined.empty()) joined += ',';
    joined += member;
  }
  note = "longer than 512 characters: " + std::to_string(left_out) + " entries left out";
  return joined;
}

}  // namespace

std::optional<std::string> checked_tracestate(std::string_view tracestate, std::string& why) {
  why.clear();
  tracestate = trim_ows(tracestate);
  const std::vector<std::string_view> members = tracestate_members(tracestate, why);
  if (!why.empty()) return std::nullopt;
  // "list": a maximum of 32 list-members (empty ones, which joining several header fields
  // makes, are not counted).
  if (members.size() > 32) {
    why = "more than 32 list-members";
    return std::nullopt;
  }
  if (members.empty()) return std::string();
  if (tracestate.size() <= 512) return std::string(tracestate);
  return fit_tracestate(members, why);
}

TraceContext::ParseResult TraceContext::parse_with_reason(std::string_view traceparent, std::string_view tracestate) {
  ParseResult result;
  TraceContext context;
  result.error = parse_traceparent(traceparent, context);
  // "Tracestate Header": if the traceparent failed to parse, the tracestate MUST NOT be parsed;
  // a tracestate that fails to parse MUST NOT affect the traceparent.
  if (!result.error.empty()) return result;
  if (std::optional<std::string> kept = checked_tracestate(tracestate, result.tracestate_note))
    context.tracestate = std::move(*kept);
  result.context = std::move(context);
  return result;
}

std::optional<TraceContext> TraceContext::parse(std::string_view traceparent, std::string_view tracestate) {
  return parse_with_reason(traceparent, tracestate).context;
}

std::string TraceContext::traceparent() const {
  std::string header = "00-";
  header.reserve(kVersion00Length);
  append_hex(header, trace_id.data(), trace_id.size());
  header += '-';
  append_hex(header, span_id.data(), span_id.size());
  header += '-';
  append_hex(header, &flags, 1);
  return header;
}

std::string TraceContext::trace_id_hex() const {
  std::string hex;
  append_hex(hex, trace_id.data(), trace_id.size());
  return hex;
}

std::string TraceContext::span_id_hex() const {
  std::string hex;
  append_hex(hex, span_id.data(), span_id.size());
  return hex;
}

bool TraceContext::valid() const {
  return !all_zero(trace_id) && !all_zero(span_id);
}

// Ids. Each id comes from an input no other id of the process had, passed through keyed
// bijections of 64 bits: distinct inputs give distinct ids in this process, and the keys,
// random per process (getrandom once, again in a fork child), make ids of other processes and
// hosts look unrelated. No lock and no system call per id.
namespace {

struct IdKeys {
  uint64_t trace_high, trace_low, span, offset;
};

IdKeys g_keys;

// Inputs are handed out to threads in blocks from one process-wide counter: one atomic add per
// block, and no input is handed out twice (2^48 blocks, however many threads come and go).
constexpr uint64_t kIdBlock = uint64_t{1} << 16;
std::atomic<uint64_t> g_next_id_block{0};

struct IdThreadState {
  uint64_t next = 0, end = 0;  // what is left of the thread's block
};
thread_local constinit IdThreadState t_ids{};

// The splitmix64 finalizer: each step (xor-shift, odd multiply) is invertible.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t keyed(uint64_t input, uint64_t key, uint64_t offset) {
  return mix(input ^ key) + offset;
}

void fill_random(void* out, size_t size) {
  auto* bytes = static_cast<uint8_t*>(out);
  size_t done = 0;
  while (done < size) {
    const ssize_t got = getrandom(bytes + done, size - done, 0);
    if (got > 0) {
      done += static_cast<size_t>(got);
    } else if (got < 0 && errno != EINTR) {
      break;
    }
  }
  if (done == size) return;
  // No getrandom (a kernel before 3.17, a seccomp filter): the clocks, the pid and an address
  // still differ between processes and hosts, which is all the keys must do.
  timespec realtime{}, monotonic{};
  clock_gettime(CLOCK_REALTIME, &realtime);
  clock_gettime(CLOCK_MONOTONIC, &monotonic);
  uint64_t seed = mix(static_cast<uint64_t>(realtime.tv_sec) * 1'000'000'000 + realtime.tv_nsec) ^
                  mix(static_cast<uint64_t>(monotonic.tv_nsec) ^ static_cast<uint64_t>(getpid()) << 32) ^
                  mix(reinterpret_cast<uintptr_t>(&seed));
  for (size_t i = done; i < size; ++i) bytes[i] = static_cast<uint8_t>(seed = mix(seed + i));
}

// Runs in the fork child, which has one thread: its ids would otherwise repeat the parent's,
// since the blocks were copied with the memory.
void resalt_in_child() {
  fill_random(&g_keys, sizeof g_keys);
}

const IdKeys& keys() {
  static const bool salted = [] {
    fill_random(&g_keys, sizeof g_keys);
    pthread_atfork(nullptr, nullptr, resalt_in_child);
    return true;
  }();
  (void)salted;
  return g_keys;
}

uint64_t next_id_input() {
  IdThreadState& state = t_ids;
  if (state.next == state.end) {
    state.next = g_next_id_block.fetch_add(kIdBlock, std::memory_order_relaxed);
    state.end = state.next + kIdBlock;
  }
  return state.next++;
}

void store_big_endian(uint64_t value, uint8_t* out) {
  for (int i = 7; i >= 0; --i, value >>= 8) out[i] = static_cast<uint8_t>(value);
}

// A span id, never zero: the one input that maps to zero is skipped.
void new_span_id(const IdKeys& k, std::array<uint8_t, 8>& span_id) {
  uint64_t id = 0;
  while (id == 0) id = keyed(next_id_input(), k.span, k.offset);
  store_big_endian(id, span_id.data());
}

}  // namespace

TraceContext TraceContext::new_trace(bool sampled) {
  const IdKeys& k = keys();
  TraceContext context;
  uint64_t low = 0, input = 0;
  while (low == 0) low = keyed(input = next_id_input(), k.trace_low, k.offset);
  store_big_endian(keyed(input, k.trace_high, k.offset), context.trace_id.data());
  store_big_endian(low, context.trace_id.data() + 8);
  new_span_id(k, context.span_id);
  context.flags = sampled ? kSampledFlag : 0;
  return context;
}

TraceContext TraceContext::child() const {
  TraceContext context;
  context.trace_id = trace_id;
  new_span_id(keys(), context.span_id);
  context.flags = flags & kSampledFlag;
  context.tracestate = tracestate;
  return context;
}

}  // namespace chronicle
