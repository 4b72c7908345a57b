// What the TCP rendezvous (tcp_rendezvous.cpp) and the heartbeat channel (tcp_heartbeats.cpp) share:
// deadlines turned into poll() timeouts, small messages sent at once, and the peer of a connection named for
// messages.
#pragma once

#include <chrono>
#include <string>

namespace nanoforge {

using TcpClock = std::chrono::steady_clock;

// The time point `seconds` from now.
TcpClock::time_point tcp_deadline_after(double seconds);

// Milliseconds until `deadline` for poll(): 0 once it has passed, at most 2^30.
int tcp_remaining_ms(TcpClock::time_point deadline);

// Sends small writes on `fd` at once (TCP_NODELAY): the channels' messages are a few bytes each.
void tcp_set_no_delay(int fd);

// "10.0.0.7:41234", "[fe80::1]:41234" (an IPv4 peer of a dual-stack listener as IPv4): who is at the other
// end of the connection `fd`, or "an unknown address".
std::string tcp_peer_address(int fd);

}  // namespace nanoforge
