// The TCP transport's options for one communicator, from what every
// transport is given (transport/kind.h) and its own settings. The RDMA
// transport's side links are TCP links made from the same.
#pragma once

#include "transport/kind.h"
#include "transport/tcp/tcp_transport.h"

namespace kolo {

TcpOptions tcp_options(const TransportContext& context);

}  // namespace kolo
