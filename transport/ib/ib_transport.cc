#include "transport/ib/ib_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/log.h"
#include "transport/handshake.h"
#include "transport/ib/verbs_library.h"

namespace kolo {

namespace {

constexpr int kMaxSendWr = 256;

}  // namespace

// The NIC's registration calls, for MemoryRegistrar.
class IbTransport::VerbsRegistration : public NicRegistration {
 public:
  explicit VerbsRegistration(ibv_pd* pd) : pd_(pd) {}

  Status register_addresses(uintptr_t addr, size_t length, MemoryRegion* out) override {
    ibv_mr* mr = verbs().reg_mr(pd_, reinterpret_cast<void*>(addr), length, kAccess);
    if (!mr) {
      return transport_error("ibv_reg_mr of " + std::to_string(length) + " bytes failed: " + std::strerror(errno) +
                             " (is the locked-memory limit, ulimit -l, too low?)");
    }
    fill(mr, addr, length, out);
    return Status::ok();
  }

  Status register_dmabuf(int fd, uint64_t offset, uintptr_t addr, size_t length, MemoryRegion* out) override {
    const VerbsLibrary& ibv = verbs();
    if (!ibv.reg_dmabuf_mr) {
      return unsupported(ibv.file() + " has no ibv_reg_dmabuf_mr (rdma-core 34 or newer has it)");
    }
    ibv_mr* mr = ibv.reg_dmabuf_mr(pd_, offset, length, addr, fd, kAccess);
    if (!mr) return transport_error("ibv_reg_dmabuf_mr failed: " + std::string(std::strerror(errno)));
    fill(mr, addr, length, out);
    return Status::ok();
  }

  void deregister(const MemoryRegion& region) override { verbs().dereg_mr(static_cast<ibv_mr*>(region.handle)); }

 private:
  static constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

  static void fill(ibv_mr* mr, uintptr_t addr, size_t length, MemoryRegion* out) {
    out->addr = addr;
    out->length = length;
    out->lkey = mr->lkey;
    out->rkey = mr->rkey;
    out->handle = mr;
  }

  ibv_pd* pd_;
};

IbTransport::IbTransport(Store* store, int rank, int size, const IbOptions& options)
    : store_(store), rank_(rank), size_(size), options_(options) {}

Status IbTransport::create(Store* store, int rank, int size, const IbOptions& options,
                           std::unique_ptr<IbTransport>* out) {
  // Without libibverbs there is no RDMA device (query_ib_devices finds
  // none): said with the reason, for KOLO_TRANSPORT=ib's error.
  if (!VerbsLibrary::get().loaded()) return unsupported("no RDMA device: " + VerbsLibrary::get().status().message());
  std::vector<IbDeviceInfo> devices;
  KOLO_RETURN_IF_ERROR(query_ib_devices(&devices));
  IbChoice choice;
  KOLO_RETURN_IF_ERROR(choose_ib_port(devices, options.settings, &choice));
  std::unique_ptr<IbTransport> t(new IbTransport(store, rank, size, options));
  KOLO_RETURN_IF_ERROR(t->open(choice));
  TcpOptions link = options.link;
  // Apart from a TCP transport of the same communicator (peers reached over
  // TCP beside RDMA ones), which shares the process's TCP listener.
  link.job_id = job_id_from_name("ib-link/" + std::to_string(options.job_id));
  link.store_prefix = options.store_prefix + "link/";
  link.streams_per_peer = 1;
  link.checksum = false;  // carries no data
  KOLO_RETURN_IF_ERROR(TcpTransport::create(store, rank, size, link, &t->link_));
  KOLO_INFO("RDMA transport on " << choice.describe());
  *out = std::move(t);
  return Status::ok();
}

Status IbTransport::open(const IbChoice& choice) {
  choice_ = choice;
  KOLO_RETURN_IF_ERROR(loop_.open());
  KOLO_RETURN_IF_ERROR(IbDeviceContext::get(choice.device, &device_));
  device_->add_listener(this);
  ibv_context* context = device_->context();
  const VerbsLibrary& ibv = verbs();
  channel_ = ibv.create_comp_channel(context);
  if (!channel_) return transport_error("ibv_create_comp_channel: " + std::string(std::strerror(errno)));
  int flags = ::fcntl(channel_->fd, F_GETFL);
  if (flags < 0 || ::fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return errno_error(Code::kTransport, "fcntl(verbs completion channel)", errno);
  }
  ibv_device_attr attr{};
  if (ibv.query_device(context, &attr) != 0) return transport_error("ibv_query_device failed");
  // Room for every completion that can be outstanding: each peer's receive
  // slots and send queue.
  const int wanted = std::max(1, size_ - 1) * (options_.window + kMaxSendWr) + 16;
  cq_ = ibv.create_cq(context, std::min(wanted, attr.max_cqe), nullptr, channel_, 0);
  if (!cq_) return transport_error("ibv_create_cq: " + std::string(std::strerror(errno)));
  verbs_ = std::make_unique<VerbsRegistration>(device_->pd());
  registrar_ = std::make_unique<MemoryRegistrar>(verbs_.get(), cuda_driver());
  cache_ = std::make_unique<RegistrationCache>(registrar_.get());
  return Status::ok();
}

IbTransport::~IbTransport() {
  if (device_) device_->remove_listener(this);
  abort();  // ends the links: the peers learn this rank is gone
  (void)pairs_.for_each([](int, IbPair& p) {
    p.break_connection();
    return Status::ok();
  });
  prepared_.clear();
  // Every queue pair is in the error state now: its outstanding requests
  // complete as flushed. Collect them, so their bookkeeping is freed.
  if (cq_) {
    ibv_wc wcs[32];
    for (int rounds = 0; rounds < 1000; ++rounds) {
      int n = ibv_poll_cq(cq_, 32, wcs);
      if (n <= 0) break;
      for (int i = 0; i < n; ++i) {
        auto* work = reinterpret_cast<IbWork*>(wcs[i].wr_id);
        if (work && work->kind != IbWork::kControlRecv) delete work;
      }
    }
  }
  pairs_.clear();
  link_.reset();
  cache_.reset();
  registrar_.reset();
  verbs_.reset();
  if (cq_) verbs().destroy_cq(cq_);
  if (channel_) verbs().destroy_comp_channel(channel_);
  device_.reset();  // the last transport on the device closes it
}

Status IbTransport::prepare(const std::vector<int>& peers) {
  for (int peer : peers) {
    if (peer < 0 || peer >= size_ || peer == rank_) {
      return invalid_argument("cannot connect to rank " + std::to_string(peer));
    }
    if (prepared_.count(peer) || pairs_.contains(peer)) continue;
    IbPairOptions popt;
    popt.window = options_.window;
    popt.max_send_wr = kMaxSendWr;
    popt.port = choice_.port;
    popt.gid_index = choice_.gid_index;
    popt.mtu = choice_.mtu;
    popt.ethernet = choice_.ethernet;
    auto pair = std::make_unique<IbPair>(rank_, peer, device_->pd(), cq_, cache_.get(), registrar_.get(), popt);
    IbAddress mine{};
    mine.job_id = options_.job_id;
    mine.from_rank = rank_;
    mine.to_rank = peer;
    mine.world_size = size_;
    mine.lid = choice_.lid;
    mine.port = static_cast<uint8_t>(choice_.port);
    mine.mtu = choice_.mtu;
    std::memcpy(mine.gid, choice_.gid, sizeof(mine.gid));
    mine.gid_index = choice_.gid_index;
    KOLO_RETURN_IF_ERROR(pair->create(&mine));
    KOLO_RETURN_IF_ERROR(store_->set(address_key(rank_, peer), encode_ib_address(mine)));
    prepared_[peer] = std::move(pair);
  }
  return Status::ok();
}

std::string IbTransport::address_key(int from, int to) const {
  return options_.store_prefix + "addr/" + std::to_string(from) + "/" + std::to_string(to);
}

Status IbTransport::connect(int peer, Deadline deadline) {
  if (pairs_.contains(peer)) return Status::ok();
  KOLO_RETURN_IF_ERROR(prepare({peer}));
  KOLO_RETURN_IF_ERROR(link_->connect(peer, deadline));
  std::string theirs;
  Status s = store_->get_one(address_key(peer, rank_), deadline, &theirs);
  if (!s.is_ok()) return s.with_context("waiting for rank " + std::to_string(peer) + "'s RDMA address");
  IbAddress remote{};
  KOLO_RETURN_IF_ERROR(decode_ib_address(theirs, IbExpectation{options_.job_id, rank_, peer, size_}, &remote));
  std::unique_ptr<IbPair> pair = std::move(prepared_[peer]);
  prepared_.erase(peer);
  KOLO_RETURN_IF_ERROR(pair->connect(remote));
  link_fds_[peer] = link_->socket_fd(peer);
  ended_links_.erase(peer);
  return pairs_.add(peer, std::move(pair));
}

Status IbTransport::pair_for(int peer, IbPair** pair) {
  if (!failed_.is_ok()) return failed_;
  return pairs_.lookup(peer, rank_, pair);
}

Status IbTransport::post_send(int peer, const void* data, size_t bytes, uint64_t tag, Request* request) {
  IbPair* pair = nullptr;
  KOLO_RETURN_IF_ERROR(pair_for(peer, &pair));
  Status s = pair->post_send(data, bytes, tag, request);
  return s.is_ok() ? s : fail(s);
}

Status IbTransport::post_recv(int peer, void* data, size_t bytes, uint64_t tag, Request* request) {
  IbPair* pair = nullptr;
  KOLO_RETURN_IF_ERROR(pair_for(peer, &pair));
  Status s = pair->post_recv(data, bytes, tag, request);
  return s.is_ok() ? s : fail(s);
}

Status IbTransport::fail(Status s) {
  if (failed_.is_ok()) failed_ = s;
  return s;
}

Status IbTransport::poll_completions(int* completed) {
  KOLO_RETURN_IF_ERROR(take_event_failure());
  ibv_wc wcs[32];
  for (;;) {
    int n = ibv_poll_cq(cq_, 32, wcs);
    if (n < 0) return fail(transport_error("ibv_poll_cq failed"));
    for (int i = 0; i < n; ++i) {
      auto* work = reinterpret_cast<IbWork*>(wcs[i].wr_id);
      const int peer = work->pair->peer();
      Status s = work->pair->on_completion(wcs[i], work, completed);
      if (!s.is_ok()) return fail(explain_failure(peer, s));
    }
    if (n < 32) return Status::ok();
  }
}

Status IbTransport::sleep_until_event(Deadline deadline, int* completed) {
  // Arm the channel, then look once more: a completion that arrived before
  // arming raises no event.
  if (ibv_req_notify_cq(cq_, 0) != 0) return fail(transport_error("ibv_req_notify_cq failed"));
  KOLO_RETURN_IF_ERROR(poll_completions(completed));
  if (*completed > 0) return Status::ok();
  std::vector<pollfd> fds = {{channel_->fd, POLLIN, 0}, {device_->async_fd(), POLLIN, 0}};
  std::vector<int> watched;  // the peers of fds[2...]
  for (const auto& link : link_fds_) {
    fds.push_back({link.second, POLLIN | POLLRDHUP, 0});
    watched.push_back(link.first);
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.time_point() -
                                                                          std::chrono::steady_clock::now());
  const int timeout_ms = static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 1000));
  int ready = 0;
  KOLO_RETURN_IF_ERROR(loop_.wait(&fds, timeout_ms, &ready));
  if (ready == 0) return Status::ok();
  if (fds[0].revents & POLLIN) {
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    if (verbs().get_cq_event(channel_, &ev_cq, &ev_ctx) == 0) verbs().ack_cq_events(ev_cq, 1);
  }
  if (fds[1].revents & POLLIN) {
    device_->read_async_events();
    KOLO_RETURN_IF_ERROR(take_event_failure());
  }
  for (size_t i = 0; i < watched.size(); ++i) {
    if (fds[2 + i].revents && link_ended(watched[i], 0)) KOLO_RETURN_IF_ERROR(on_link_end(watched[i], completed));
  }
  return Status::ok();
}

bool IbTransport::link_ended(int peer, int wait_ms) {
  if (ended_links_.count(peer)) return true;
  auto it = link_fds_.find(peer);
  if (it == link_fds_.end()) return false;
  // Nothing is ever sent on a link, so readable means ended: EOF, or a reset.
  pollfd fd{it->second, POLLIN | POLLRDHUP, 0};
  if (::poll(&fd, 1, wait_ms) <= 0) return false;
  char byte;
  ssize_t n = ::recv(it->second, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

Status IbTransport::on_link_end(int peer, int* completed) {
  link_fds_.erase(peer);
  ended_links_.insert(peer);
  IbPair* pair = nullptr;
  KOLO_RETURN_IF_ERROR(pair_for(peer, &pair));
  // What the peer sent before it ended may not be taken in yet (its socket
  // can close before this rank polled the completions of its last writes):
  // give the queue a moment before calling anything lost.
  const auto settle_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  do {
    KOLO_RETURN_IF_ERROR(poll_completions(completed));
  } while (pair->has_pending() && std::chrono::steady_clock::now() < settle_until);
  KOLO_DEBUG("the link to rank " << peer << " ended; " << pair->describe_pending());
  Status s = pair->on_peer_gone();
  return s.is_ok() ? s : fail(s);
}

Status IbTransport::explain_failure(int peer, Status s) {
  if (s.code() != Code::kTransport) return s;
  // A killed peer's queue pair and memory go before, or after, its
  // sockets: wait for the link to say which this is. The kernel may take
  // seconds to tear down a dead process's registered memory before it
  // closes the sockets (over 1 s under emulation, seen in the soft-RoCE
  // VM), and a real transport failure is rare enough to afford the wait.
  if (link_ended(peer, 5000)) {
    return peer_lost(s.message() + "; rank " + std::to_string(peer) + "'s process has ended");
  }
  return s;
}

void IbTransport::on_async_event(const ibv_async_event& event) {
  Status s;
  switch (event.event_type) {
    case IBV_EVENT_PORT_ERR:
      if (event.element.port_num == choice_.port) {
        s = transport_error("port " + std::to_string(choice_.port) + " of RDMA device " + choice_.device +
                            " went down (IBV_EVENT_PORT_ERR)");
      }
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR: {
      // Only this transport's own queue pairs: the device is shared.
      (void)pairs_.for_each([&](int peer, IbPair& p) {
        if (p.qp() == event.element.qp) {
          s = transport_error("the queue pair to rank " + std::to_string(peer) +
                              " failed: " + verbs().event_type_str(event.event_type));
        }
        return Status::ok();
      });
      break;
    }
    case IBV_EVENT_DEVICE_FATAL:
      s = transport_error("RDMA device " + choice_.device + " failed (IBV_EVENT_DEVICE_FATAL)");
      break;
    default:
      KOLO_DEBUG("RDMA event: " << verbs().event_type_str(event.event_type));
      break;
  }
  if (s.is_ok()) return;
  {
    std::lock_guard<std::mutex> lock(event_mutex_);
    if (event_failure_.is_ok()) event_failure_ = s;
  }
  event_failed_.store(true);
  loop_.interrupt();  // a progress() asleep on another descriptor looks again
}

Status IbTransport::take_event_failure() {
  if (!event_failed_.load(std::memory_order_relaxed)) return Status::ok();
  std::lock_guard<std::mutex> lock(event_mutex_);
  return fail(event_failure_);
}

Status IbTransport::register_memory(const void* data, size_t bytes) {
  if (data == nullptr || bytes == 0) return Status::ok();
  Status s = cache_->add(data, bytes);
  if (!s.is_ok()) KOLO_WARN("memory left unregistered, so messages in it are staged: " << s.message());
  return s;
}

void IbTransport::deregister_memory(const void* data, size_t bytes) {
  if (data != nullptr && bytes > 0) cache_->invalidate(data, bytes);
}

IbTransport::Stats IbTransport::stats() {
  Stats s;
  s.registrations = cache_->stats().registrations;
  s.direct = cache_->stats().hits;
  s.staged = cache_->stats().misses;
  (void)pairs_.for_each([&](int, IbPair& p) {
    s.registrations += p.staging_registrations();
    return Status::ok();
  });
  return s;
}

void IbTransport::inject_queue_pair_error(int peer) {
  if (IbPair* pair = pairs_.find(peer)) pair->break_connection();
}

Status IbTransport::probe_pending_peers() {
  Status probed = pairs_.for_each([](int, IbPair& p) { return p.has_pending() ? p.probe() : Status::ok(); });
  return probed.is_ok() ? probed : fail(probed);
}

std::string IbTransport::describe_pending() {
  std::string what;
  (void)pairs_.for_each([&](int, IbPair& p) {
    if (p.has_pending()) what += (what.empty() ? "" : "; ") + p.describe_pending();
    return Status::ok();
  });
  return what;
}

bool IbTransport::has_pending() {
  return pairs_.any([](IbPair& p) { return p.has_pending(); });
}

Status IbTransport::pump(Pumped* pumped) {
  // A failure is sticky; the loop reports an abort before it.
  if (!failed_.is_ok()) return failed_;
  KOLO_RETURN_IF_ERROR(poll_completions(&pumped->completed));
  if (pumped->completed > 0) next_probe_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  return Status::ok();
}

Status IbTransport::sleep(Deadline deadline, Pumped* pumped) {
  using Clock = std::chrono::steady_clock;
  // A wait that starts now (not a sleep right after the last one) probes
  // only after a second of it, as progress() does.
  if (Clock::now() - last_sleep_ > std::chrono::milliseconds(50)) next_probe_ = Clock::now() + std::chrono::seconds(1);
  Status s = sleep_until_event(deadline, &pumped->completed);
  last_sleep_ = Clock::now();
  KOLO_RETURN_IF_ERROR(s);
  const auto now = last_sleep_;
  if (pumped->completed > 0 || now < next_probe_) return Status::ok();
  // Waited a second with nothing completing: make sure the peers we wait
  // on are alive (a dead one fails the probe within ~0.5 s).
  next_probe_ = now + std::chrono::seconds(1);
  return probe_pending_peers();
}

Status IbTransport::progress(Deadline deadline) {
  next_probe_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  return loop_.run(
      deadline, [this](Pumped* pumped) { return pump(pumped); },
      [this](Deadline d, Pumped* pumped) { return sleep(d, pumped); }, [this] { return describe_pending(); });
}

void IbTransport::abort() {
  if (!loop_.abort()) return;
  if (link_) link_->abort();  // the neighbours see their links end
}

void IbTransport::interrupt() { loop_.interrupt(); }

}  // namespace kolo
