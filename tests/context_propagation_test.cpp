// Trace context propagation (chronicle/context.hpp): what is in scope at run time, and that the
// reader gives every span, task, send and receive the same ids: a receive is a child of the
// sender's send span, spans inside a receive are its children, a coroutine continues its
// creator's trace on whatever thread it resumes, and a send's traceparent names the span the
// trace records for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <asio.hpp>
#include <chronicle/chronicle.hpp>
#include <chronicle/context.hpp>
#include <chronicle/coro.hpp>
#include <condition_variable>
#include <coroutine>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "reader/span_pairing.hpp"
#include "support.hpp"

namespace chronicle {
namespace {

using test::TemporaryDirectory;
using test::test_config;

const std::string kCli = CHRONICLE_CLI;

std::string trace_hex(uint64_t high, uint64_t low) {
  char text[33];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(high),
                static_cast<unsigned long long>(low));
  return text;
}

std::string span_hex(uint64_t id) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(id));
  return text;
}

TEST(ContextPropagation, OutsideAnyScopeNothingIsInScopeAndASendStartsATrace) {
  EXPECT_FALSE(current_context().valid());
  const auto sent = TraceContext::parse(send_traceparent());
  ASSERT_TRUE(sent.has_value());
  EXPECT_TRUE(sent->valid());
  EXPECT_FALSE(current_context().valid()) << "a send changes nothing in scope";
}

TEST(ContextPropagation, AReceiveScopeContinuesTheSendersTraceAndEndsWithTheScope) {
  const TraceContext sender = TraceContext::new_trace();
  {
    ReceiveScope scope(sender.traceparent());
    EXPECT_TRUE(scope.continued());
    const TraceContext now = current_context();
    EXPECT_EQ(now.trace_id, sender.trace_id);
    EXPECT_NE(now.span_id, sender.span_id) << "the receive is a span of its own";
    EXPECT_EQ(now.span_id, scope.context().span_id);
    const auto sent = TraceContext::parse(send_traceparent());
    ASSERT_TRUE(sent.has_value());
    EXPECT_EQ(sent->trace_id, sender.trace_id) << "a send inside continues the trace";
    {
      ReceiveScope nested(TraceContext::new_trace().traceparent());
      EXPECT_NE(current_context().trace_id, sender.trace_id);
    }
    EXPECT_EQ(current_context().trace_id, sender.trace_id) << "the inner scope restored the outer one";
  }
  EXPECT_FALSE(current_context().valid());
}

// A NewTraceScope inside a request's context starts a trace of its own: its spans and sends are
// that trace, rooted at the scope, and the request's context is back when it ends.
TEST(ContextPropagation, ANewTraceScopeStartsATraceOfItsOwnInsideAnother) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  const TraceContext sender = TraceContext::new_trace();
  std::optional<TraceContext> job_sent, request_sent;
  TraceContext job_context;
  {
    ReceiveScope request(sender.traceparent());
    {
      NewTraceScope job;
      job_context = job.context();
      EXPECT_FALSE(job.continued());
      EXPECT_NE(job_context.trace_id, sender.trace_id);
      EXPECT_EQ(current_context(), job_context);
      CHRONICLE_SPAN("job", "step");
      job_sent = TraceContext::parse(send_traceparent());
    }
    EXPECT_EQ(current_context().trace_id, sender.trace_id) << "the request's context is back";
    request_sent = TraceContext::parse(send_traceparent());
  }
  {
    NewTraceScope unsampled(false);
    EXPECT_FALSE(current_context().sampled());
  }
  stop();
  ASSERT_TRUE(job_sent && request_sent);
  EXPECT_EQ(job_sent->trace_id, job_context.trace_id);
  EXPECT_EQ(request_sent->trace_id, sender.trace_id);

  // Read back: the job's receive is a root; its span and send are its children, in its trace.
  reader::Trace trace(config.output);
  reader::SpanPairing pairing(trace);
  const std::string job_trace = job_context.trace_id_hex(), job_span = job_context.span_id_hex();
  int roots = 0, steps = 0, sends = 0;
  trace.for_each_event(pairing, [&](const reader::Event& event) {
    if (!event.span) return true;
    const reader::PairedSpan& span = *event.span;
    if (trace_hex(span.trace_high, span.trace_low) != job_trace) return true;
    if (span.role == reader::SpanRole::receive && event.type == format::EventId::context_receive_end) {
      ++roots;
      EXPECT_EQ(span_hex(span.span_id), job_span);
      EXPECT_EQ(span.parent_span_id, 0u);
    } else if (span.role == reader::SpanRole::span && event.type == format::EventId::span_end) {
      ++steps;
      EXPECT_EQ(span_hex(span.parent_span_id), job_span);
    } else if (span.role == reader::SpanRole::send) {
      ++sends;
      EXPECT_EQ(span_hex(span.span_id), job_sent->span_id_hex());
    }
    return true;
  });
  EXPECT_EQ(roots, 1);
  EXPECT_EQ(steps, 1);
  EXPECT_EQ(sends, 1);
}

TEST(ContextPropagation, AMalformedTraceparentStartsANewTraceAndSaysWhy) {
  ReceiveScope scope("00-not-a-traceparent");
  EXPECT_FALSE(scope.continued());
  EXPECT_FALSE(scope.why().empty());
  EXPECT_TRUE(current_context().valid());
}

TEST(ContextPropagation, HeaderMapsCarryTheTraceparent) {
  const TraceContext sender = TraceContext::new_trace();
  ReceiveScope scope(sender.traceparent());
  std::map<std::string, std::string> headers{{"traceparent", "stale"}};
  inject(headers);
  const std::optional<TraceContext> extracted = extract(headers);
  ASSERT_TRUE(extracted.has_value()) << headers["traceparent"];
  EXPECT_EQ(extracted->trace_id, sender.trace_id);
  EXPECT_FALSE(extract(std::map<std::string, std::string>{}).has_value());
}

task<TraceContext> context_in_a_task() {
  co_return current_context();
}

TEST(ContextPropagation, AReceivedTracestateIsCarriedOnToSendsAndTasks) {
  const TraceContext sender = TraceContext::new_trace();
  {
    ReceiveScope scope(sender.traceparent(), "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
    EXPECT_EQ(current_context().tracestate, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
    EXPECT_EQ(sync_wait(context_in_a_task()).tracestate, current_context().tracestate) << "a task carries it";
    std::map<std::string, std::string> headers{{"tracestate", "stale=1"}};
    inject(headers);
    EXPECT_EQ(headers["tracestate"], "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
    {
      ReceiveScope inner(TraceContext::new_trace().traceparent());
      EXPECT_EQ(current_context().tracestate, "") << "a receive with none carries none";
      std::map<std::string, std::string> none;
      inject(none);
      EXPECT_EQ(none.count("tracestate"), 0u);
    }
    EXPECT_EQ(current_context().tracestate, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7") << "restored";
  }
  EXPECT_EQ(current_context().tracestate, "");
}

// A coroutine type that carries no context (not chronicle::task): a ReceiveScope in it writes the
// slot of the thread it opened on. Closed on another thread, it must not write that thread's slot:
// the thread may be running (a race) or gone (its storage freed).
struct Detached {
  struct promise_type {
    Detached get_return_object() { return {std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { std::terminate(); }
  };
  std::coroutine_handle<promise_type> handle;
};

Detached receive_then_suspend(std::string traceparent) {
  ReceiveScope scope(traceparent);
  co_await std::suspend_always{};
}

TEST(ContextPropagation, AReceiveScopeClosedOnAnotherThreadLeavesTheOpeningThreadsSlotAlone) {
  const TraceContext sender = TraceContext::new_trace();
  Detached coroutine = receive_then_suspend(sender.traceparent());
  std::mutex mutex;
  std::condition_variable changed;
  int stage = 0;
  TraceContext after_close;
  std::thread opener([&] {
    coroutine.handle.resume();  // opens the scope on this thread, then suspends
    std::unique_lock lock(mutex);
    stage = 1;
    changed.notify_all();
    changed.wait(lock, [&] { return stage == 2; });
    after_close = current_context();
  });
  {
    std::unique_lock lock(mutex);
    changed.wait(lock, [&] { return stage == 1; });
  }
  coroutine.handle.resume();  // closes the scope here
  EXPECT_FALSE(current_context().valid()) << "this thread's slot was never changed";
  {
    std::lock_guard lock(mutex);
    stage = 2;
    changed.notify_all();
  }
  opener.join();
  coroutine.handle.destroy();
  EXPECT_EQ(after_close.trace_id, sender.trace_id) << "the closing thread wrote the opening thread's slot";
}

task<TraceContext> context_after_moving(thread_pool& pool) {
  co_await pool.schedule();
  co_return current_context();
}

TEST(ContextPropagation, ACoroutineCarriesItsCreatorsTraceToAnotherThread) {
  TemporaryDirectory directory;
  ASSERT_TRUE(start(test_config(directory))) << last_error();
  thread_pool pool(1, "context-pool");
  const TraceContext sender = TraceContext::new_trace();
  TraceContext inside;
  {
    ReceiveScope scope(sender.traceparent());
    inside = sync_wait(context_after_moving(pool));
  }
  stop();
  EXPECT_EQ(inside.trace_id, sender.trace_id);
  EXPECT_TRUE(inside.valid());
  EXPECT_NE(inside.span_id, sender.span_id) << "the task's own span";
}

// What each task saw as its context at run time, by task id.
using SeenContexts = std::map<uint64_t, TraceContext>;

task<void> leaf(SeenContexts& seen) {
  seen[current_task()] = current_context();
  co_return;
}

task<void> middle(SeenContexts& seen) {
  seen[current_task()] = current_context();
  co_await leaf(seen);
}

task<void> tree_root(SeenContexts& seen, const std::string& traceparent) {
  seen[current_task()] = current_context();
  for (int i = 0; i < 3; ++i) co_await middle(seen);
  ReceiveScope scope(traceparent);
  co_await middle(seen);
}

TEST(ContextPropagation, ChildTasksRecordTheirTraceOnlyWhenTheReaderCannotDeriveIt) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  SeenContexts seen;
  const TraceContext sender = TraceContext::new_trace();
  sync_wait(tree_root(seen, sender.traceparent()));
  stop();

  reader::Trace trace(config.output);
  reader::SpanPairing pairing(trace);
  int task_context_events = 0;
  trace.for_each_event(pairing, [&](const reader::Event& event) {
    if (event.type == format::EventId::task_context) ++task_context_events;
    return true;
  });
  ASSERT_EQ(seen.size(), 9u) << "the root, 4 middles, 4 leaves";
  for (const auto& [task, context] : seen) {
    const auto [high, low] = pairing.task_trace(task);
    EXPECT_EQ(trace_hex(high, low), context.traceparent().substr(3, 32)) << "task " << task;
    EXPECT_EQ(span_hex(pairing.task_span_id(task)), context.traceparent().substr(36, 16)) << "task " << task;
  }
  // Only the middle task created inside the receive has a trace its parent's does not give.
  EXPECT_EQ(task_context_events, 1) << "children of a task in its own context are derived by the reader";
}

// A message queue between a "client" and a "server" thread of one process, standing in for a
// socket: what crosses it is the traceparent string only.
class Wire {
 public:
  void send(std::string message) {
    std::lock_guard lock(mutex_);
    messages_.push_back(std::move(message));
    ready_.notify_one();
  }
  std::string receive() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return !messages_.empty(); });
    std::string message = std::move(messages_.front());
    messages_.pop_front();
    return message;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::string> messages_;
};

constexpr int kRequests = 3;

task<void> client_request(Wire& wire, std::vector<std::string>& sent) {
  CHRONICLE_SPAN("client", "request");
  std::string traceparent = send_traceparent();
  sent.push_back(traceparent);
  wire.send(std::move(traceparent));
  co_return;
}

// Serves `messages` messages, each in a receive scope with a "handle" span.
void serve(Wire& wire, int messages) {
  set_thread_name("server");
  for (int i = 0; i < messages; ++i) {
    const std::string traceparent = wire.receive();
    ReceiveScope scope(traceparent);
    CHRONICLE_SPAN("server", "handle");
  }
}

struct Recorded {
  std::vector<reader::PairedSpan> sends, receives, requests, handles;
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> task_traces;  // request's task -> its trace
  std::map<uint64_t, uint64_t> task_spans;
};

Recorded read_contexts(const reader::Trace& trace) {
  Recorded recorded;
  reader::SpanPairing pairing(trace);
  trace.for_each_event(pairing, [&](const reader::Event& event) {
    if (!event.span) return true;
    const reader::PairedSpan& span = *event.span;
    if (event.type == format::EventId::context_send) recorded.sends.push_back(span);
    if (event.type == format::EventId::context_receive_end) recorded.receives.push_back(span);
    if (event.type == format::EventId::span_end) {
      const reader::Site* site = trace.site(span.site_id);
      if (site && site->name == "request") {
        recorded.requests.push_back(span);
        recorded.task_traces[span.task] = pairing.task_trace(span.task);
        recorded.task_spans[span.task] = pairing.task_span_id(span.task);
      }
      if (site && site->name == "handle") recorded.handles.push_back(span);
    }
    return true;
  });
  return recorded;
}

TEST(ContextPropagation, TheReaderJoinsSendsReceivesSpansAndTasksIntoOneTracePerRequest) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  Wire wire;
  std::vector<std::string> sent;
  {
    std::thread server_thread(serve, std::ref(wire), kRequests);
    for (int i = 0; i < kRequests; ++i) sync_wait(client_request(wire, sent));
    server_thread.join();
  }
  stop();

  reader::Trace trace(config.output);
  const Recorded recorded = read_contexts(trace);
  ASSERT_EQ(recorded.sends.size(), static_cast<size_t>(kRequests));
  ASSERT_EQ(recorded.receives.size(), static_cast<size_t>(kRequests));
  ASSERT_EQ(recorded.requests.size(), static_cast<size_t>(kRequests));
  ASSERT_EQ(recorded.handles.size(), static_cast<size_t>(kRequests));
  std::vector<std::string> traces;
  for (int i = 0; i < kRequests; ++i) {
    const reader::PairedSpan& send = recorded.sends[i];
    const reader::PairedSpan& receive = recorded.receives[i];
    const reader::PairedSpan& request = recorded.requests[i];
    const reader::PairedSpan& handle = recorded.handles[i];
    const std::string trace_id = trace_hex(send.trace_high, send.trace_low);
    traces.push_back(trace_id);
    // What went on the wire is what the trace records for the send.
    EXPECT_EQ(sent[i], "00-" + trace_id + "-" + span_hex(send.span_id) + "-01");
    // The client: the request span is in its task's trace, a child of the task's span; the send
    // is a child of the request span.
    ASSERT_NE(request.task, 0u);
    EXPECT_EQ(recorded.task_traces.at(request.task), std::make_pair(request.trace_high, request.trace_low));
    EXPECT_EQ(request.parent_span_id, recorded.task_spans.at(request.task));
    EXPECT_EQ(trace_hex(request.trace_high, request.trace_low), trace_id);
    EXPECT_EQ(send.parent_span_id, request.span_id);
    // The server: the receive is a child of the send, the handle span a child of the receive.
    EXPECT_EQ(trace_hex(receive.trace_high, receive.trace_low), trace_id);
    EXPECT_EQ(receive.parent_span_id, send.span_id);
    EXPECT_EQ(trace_hex(handle.trace_high, handle.trace_low), trace_id);
    EXPECT_EQ(handle.parent_span_id, receive.span_id);
    EXPECT_LE(send.begin, receive.begin) << "a receive never precedes its send";
  }
  std::sort(traces.begin(), traces.end());
  EXPECT_EQ(std::unique(traces.begin(), traces.end()), traces.end()) << "each request is a trace of its own";

  const auto dump = test::run(kCli + " dump " + config.output);
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_EQ(dump.err.find("warning"), std::string::npos) << dump.err;
  EXPECT_NE(dump.out.find("parent=" + span_hex(recorded.sends[0].span_id)), std::string::npos) << dump.out;
}

// ---- one tree per request on a plain thread (issue 43, item 5) ----------------------------

void send_call(Wire& wire, std::vector<std::string>& sent) {
  std::string traceparent = send_traceparent();
  sent.push_back(traceparent);
  wire.send(std::move(traceparent));
}

task<void> call_from_a_task(Wire& wire, std::vector<std::string>& sent) {
  CHRONICLE_SPAN("client", "call");
  send_call(wire, sent);
  co_return;
}

// A request on a thread with no context, as a user writes it: a span, work that ends before the
// first send, a call that sends, and a coroutine that sends. Returns the context in scope at its top.
TraceContext thread_request(Wire& wire, std::vector<std::string>& sent) {
  CHRONICLE_SPAN("client", "request");
  const TraceContext at_top = current_context();
  { CHRONICLE_SPAN("client", "prepare"); }
  {
    CHRONICLE_SPAN("client", "call");
    send_call(wire, sent);
  }
  sync_wait(call_from_a_task(wire, sent));
  return at_top;
}

struct RequestTree {
  std::vector<reader::PairedSpan> requests, prepares, calls, sends, receives, handles;
};

RequestTree read_request_tree(const reader::Trace& trace, reader::SpanPairing& pairing) {
  RequestTree tree;
  trace.for_each_event(pairing, [&](const reader::Event& event) {
    if (!event.span) return true;
    const reader::PairedSpan& span = *event.span;
    if (event.type == format::EventId::context_send) tree.sends.push_back(span);
    if (event.type == format::EventId::context_receive_end) tree.receives.push_back(span);
    if (event.type != format::EventId::span_end) return true;
    const reader::Site* site = trace.site(span.site_id);
    const std::string name = site ? site->name : "";
    if (name == "request") tree.requests.push_back(span);
    if (name == "prepare") tree.prepares.push_back(span);
    if (name == "call") tree.calls.push_back(span);
    if (name == "handle") tree.handles.push_back(span);
    return true;
  });
  auto by_begin = [](std::vector<reader::PairedSpan>& spans) {
    std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  };
  for (auto* spans : {&tree.requests, &tree.prepares, &tree.calls, &tree.sends, &tree.receives, &tree.handles})
    by_begin(*spans);
  return tree;
}

// `CHRONICLE_SPAN("client", "request"); write(send_traceparent());` on a thread with no context:
// the request span is the root of one trace holding everything it started, here and in the
// server; each request is a trace of its own.
TEST(ContextPropagation, AThreadsOutermostSpanIsTheRootOfTheTraceItsSendsContinue) {
  TemporaryDirectory directory;
  Config config = test_config(directory);
  ASSERT_TRUE(start(config)) << last_error();
  Wire wire;
  std::vector<std::string> sent;
  std::vector<TraceContext> at_top;
  {
    std::thread server_thread(serve, std::ref(wire), 2 * kRequests);
    for (int i = 0; i < kRequests; ++i) at_top.push_back(thread_request(wire, sent));
    server_thread.join();
  }
  EXPECT_FALSE(current_context().valid()) << "no span is open: nothing is in scope";
  stop();

  reader::Trace trace(config.output);
  reader::SpanPairing pairing(trace);
  const RequestTree tree = read_request_tree(trace, pairing);
  ASSERT_EQ(tree.requests.size(), static_cast<size_t>(kRequests));
  ASSERT_EQ(tree.prepares.size(), static_cast<size_t>(kRequests));
  ASSERT_EQ(tree.calls.size(), 2u * kRequests);
  ASSERT_EQ(tree.sends.size(), 2u * kRequests);
  ASSERT_EQ(tree.receives.size(), 2u * kRequests);
  ASSERT_EQ(tree.handles.size(), 2u * kRequests);
  auto trace_of = [](const reader::PairedSpan& span) { return trace_hex(span.trace_high, span.trace_low); };
  std::vector<std::string> traces;
  int linked = 0;
  for (int i = 0; i < kRequests; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    const reader::PairedSpan& request = tree.requests[i];
    const std::string trace_id = trace_of(request);
    traces.push_back(trace_id);
    EXPECT_EQ(request.parent_span_id, 0u) << "the root";
    EXPECT_EQ(at_top[i].traceparent(), "00-" + trace_id + "-" + span_hex(request.span_id) + "-01")
        << "current_context() inside the span names the span";
    EXPECT_EQ(trace_of(tree.prepares[i]), trace_id);
    EXPECT_EQ(tree.prepares[i].parent_span_id, request.span_id);
    for (int k = 0; k < 2; ++k) {
      const size_t n = 2 * i + k;
      const reader::PairedSpan &call = tree.calls[n], &send = tree.sends[n];
      const reader::PairedSpan &receive = tree.receives[n], &handle = tree.handles[n];
      EXPECT_EQ(sent[n], "00-" + trace_of(send) + "-" + span_hex(send.span_id) + "-01");
      EXPECT_EQ(trace_of(call), trace_id);
      if (k == 0) {
        EXPECT_EQ(call.parent_span_id, request.span_id);
      } else {
        EXPECT_EQ(call.parent_span_id, pairing.task_span_id(call.task)) << "the coroutine's span";
        EXPECT_EQ(pairing.task_parent_span(call.task), request.span_id) << "the coroutine, a child of the request";
      }
      EXPECT_EQ(send.parent_span_id, call.span_id);
      EXPECT_EQ(receive.parent_span_id, send.span_id);
      EXPECT_EQ(trace_of(handle), trace_id);
      EXPECT_EQ(handle.parent_span_id, receive.span_id);
      linked += trace_of(send) == trace_id && trace_of(receive) == trace_id;
    }
  }
  EXPECT_EQ(linked, 2 * kRequests) << "sends and receives in their request's trace";
  std::sort(traces.begin(), traces.end());
  EXPECT_EQ(std::unique(traces.begin(), traces.end()), traces.end()) << "each request is a trace of its own";
}

// What a pairing pairs, span by span, as the pairing's identities and the rest (pairing.hpp).
struct PairedSpans {
  using Identity = std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>;  // trace (2), span, parent span
  std::vector<std::tuple<uint64_t, uint64_t, uint32_t, uint32_t, uint64_t, int>> paired;
  std::vector<Identity> identities;
};

PairedSpans pair_spans(const reader::Trace& trace, reader::SpanPairing::Identities identities) {
  reader::SpanPairing pairing(trace, identities);
  PairedSpans spans;
  trace.for_each_event(pairing, [&](const reader::Event& event) {
    if (const reader::PairedSpan* span = event.span) {
      spans.paired.emplace_back(span->sequence, span->parent_sequence, span->depth, span->site_id, span->task,
                                static_cast<int>(span->role));
      spans.identities.emplace_back(span->trace_high, span->trace_low, span->span_id, span->parent_span_id);
    }
    return true;
  });
  return spans;
}

// The viewer's pairing leaves the spans' identities out, but only where the trace holds no context
// event: with sends and receives it works them out as every tool does (a send inside a span is that
// span's own by its id), and without, it pairs the same spans with no ids.
TEST(ContextPropagation, IdentitiesAreLeftOutOnlyWhereNoContextIsTraced) {
  using Identities = reader::SpanPairing::Identities;
  TemporaryDirectory directory;
  Config config = test_config(directory);
  config.output = directory / "with-sends";
  ASSERT_TRUE(start(config)) << last_error();
  {
    Wire wire;
    std::vector<std::string> sent;
    std::thread server_thread(serve, std::ref(wire), 2 * kRequests);
    for (int i = 0; i < kRequests; ++i) thread_request(wire, sent);
    server_thread.join();
  }
  stop();
  {
    const reader::Trace trace(config.output);
    const PairedSpans all = pair_spans(trace, Identities::worked_out);
    const PairedSpans unless = pair_spans(trace, Identities::left_out_unless_traced);
    ASSERT_GT(all.paired.size(), static_cast<size_t>(4 * kRequests));
    EXPECT_EQ(unless.paired, all.paired);
    EXPECT_EQ(unless.identities, all.identities) << "the trace holds sends: identities are worked out";
  }

  config.output = directory / "spans-only";
  ASSERT_TRUE(start(config)) << last_error();
  for (int i = 0; i < 50; ++i) {
    CHRONICLE_SPAN("test", "outer");
    CHRONICLE_SPAN("test", "inner");
  }
  stop();
  const reader::Trace trace(config.output);
  const PairedSpans all = pair_spans(trace, Identities::worked_out);
  const PairedSpans left_out = pair_spans(trace, Identities::left_out_unless_traced);
  ASSERT_EQ(all.paired.size(), 200u) << "each span at its begin and its end";
  EXPECT_EQ(left_out.paired, all.paired);
  EXPECT_TRUE(std::all_of(left_out.identities.begin(), left_out.identities.end(),
                          [](const PairedSpans::Identity& ids) { return ids == PairedSpans::Identity{}; }));
  EXPECT_TRUE(std::none_of(all.identities.begin(), all.identities.end(),
                           [](const PairedSpans::Identity& ids) { return std::get<2>(ids) == 0; }));
}

// A span left open across a restart of the session belongs to the old one: in the new session the
// thread's next outermost span is the root of its sends, as the new trace shows it.
TEST(ContextPropagation, ASpanOpenAcrossARestartIsNotTheRootOfTheNextSessionsSends) {
  TemporaryDirectory first, second;
  ASSERT_TRUE(start(test_config(first))) << last_error();
  std::optional<detail::ScopedSpan> across;
  static constinit detail::Site across_site{"client", "across", __FILE__, __LINE__,
                                            static_cast<uint8_t>(format::SiteKind::span)};
  across.emplace(across_site);
  stop();
  Config config = test_config(second);
  ASSERT_TRUE(start(config)) << last_error();
  Wire wire;
  std::vector<std::string> sent;
  {
    std::thread server_thread(serve, std::ref(wire), 2);
    thread_request(wire, sent);
    server_thread.join();
  }
  across.reset();
  stop();
  reader::Trace trace(config.output);
  reader::SpanPairing pairing(trace);
  const RequestTree tree = read_request_tree(trace, pairing);
  ASSERT_EQ(tree.requests.size(), 1u);
  ASSERT_EQ(tree.sends.size(), 2u);
  const reader::PairedSpan& request = tree.requests[0];
  EXPECT_EQ(request.parent_span_id, 0u);
  for (const reader::PairedSpan& send : tree.sends) {
    EXPECT_EQ(trace_hex(send.trace_high, send.trace_low), trace_hex(request.trace_high, request.trace_low));
  }
}

// What a handler posted inside a receive of `sender`'s traceparent sees as its context when it
// runs, after the receive has closed.
TraceContext context_in_a_posted_handler(const TraceContext& sender) {
  asio::io_context io(1);
  TraceContext inside;
  {
    ReceiveScope scope(sender.traceparent());
    asio::post(io, [&inside] { inside = current_context(); });
  }
  io.run();
  return inside;
}

// An Asio handler carries its poster's trace, as a coroutine carries its creator's: with a
// session, and with none (contexts propagate whether or not anything is recorded).
TEST(ContextPropagation, AnAsioHandlerCarriesThePostersTraceWithOrWithoutASession) {
  const TraceContext sender = TraceContext::new_trace();
  const TraceContext untraced = context_in_a_posted_handler(sender);
  EXPECT_TRUE(untraced.valid()) << "no session: the handler ran with no context";
  EXPECT_EQ(untraced.trace_id, sender.trace_id);

  TemporaryDirectory directory;
  ASSERT_TRUE(start(test_config(directory))) << last_error();
  const TraceContext traced = context_in_a_posted_handler(sender);
  stop();
  EXPECT_TRUE(traced.valid()) << "in a session: the handler ran with no context";
  EXPECT_EQ(traced.trace_id, sender.trace_id);
  EXPECT_NE(traced.span_id, sender.span_id) << "the handler's own span";
}

}  // namespace
}  // namespace chronicle
