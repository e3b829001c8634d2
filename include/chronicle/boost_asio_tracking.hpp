// Boost.Asio handler tracking as chronicle tasks: the same as chronicle/asio_tracking.hpp (read
// it for what is recorded), for a program built with
//
//   -DBOOST_ASIO_CUSTOM_HANDLER_TRACKING='"chronicle/boost_asio_tracking.hpp"'
#pragma once

#include "chronicle/detail/asio_hooks.hpp"

#define BOOST_ASIO_INHERIT_TRACKED_HANDLER : public ::chronicle::asio_tracking::TrackedHandler
#define BOOST_ASIO_ALSO_INHERIT_TRACKED_HANDLER , public ::chronicle::asio_tracking::TrackedHandler
#define BOOST_ASIO_HANDLER_TRACKING_INIT (void)0
#define BOOST_ASIO_HANDLER_LOCATION(args) ::chronicle::asio_tracking::Location chronicle_tracked_location args
#define BOOST_ASIO_HANDLER_CREATION(args) ::chronicle::asio_tracking::creation args
#define BOOST_ASIO_HANDLER_COMPLETION(args) ::chronicle::asio_tracking::Completion tracked_completion args
#define BOOST_ASIO_HANDLER_INVOCATION_BEGIN(args) tracked_completion.invocation_begin args
#define BOOST_ASIO_HANDLER_INVOCATION_END tracked_completion.invocation_end()
#define BOOST_ASIO_HANDLER_OPERATION(args) ::chronicle::asio_tracking::operation args
#define BOOST_ASIO_HANDLER_REACTOR_REGISTRATION(args) (void)0
#define BOOST_ASIO_HANDLER_REACTOR_DEREGISTRATION(args) (void)0
#define BOOST_ASIO_HANDLER_REACTOR_READ_EVENT 1
#define BOOST_ASIO_HANDLER_REACTOR_WRITE_EVENT 2
#define BOOST_ASIO_HANDLER_REACTOR_ERROR_EVENT 4
#define BOOST_ASIO_HANDLER_REACTOR_EVENTS(args) (void)0
#define BOOST_ASIO_HANDLER_REACTOR_OPERATION(args) (void)0
