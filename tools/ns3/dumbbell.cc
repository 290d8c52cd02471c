// The speed benchmark's scenario in ns-3, the peer packet-level simulator: the same
// dumbbell as crates/ctp-sim/tests/speed.rs, so that both simulators' packet transmissions
// per CPU second are measured side by side (tools/sim-speed/vs-ns3.sh).
//
// Two TCP NewReno bulk flows (the second starting at 1 s) from two senders through one
// router over a 1 Gb/s, 5 ms, 1000-packet drop-tail bottleneck to one receiver node; the
// senders reach the router through 10 Gb/s interfaces with no delay, as ctp-sim's access
// links (a datagram crosses two links each way, in both simulators). Socket buffers of
// 32 MiB (ctp's send_buffer in the scenario), segments of 1405 bytes (ctp's mean payload
// per data packet there), delayed ACKs every second segment (as ctp's receiver).
//
// With `udp` as the second argument the senders are two 495 Mb/s constant-rate UDP
// sources instead (no transport protocol at all, no acknowledgements): what ns-3's event
// engine and links alone cost per packet.
//
// Prints one line: `transmissions=N datagrams=N cpu_s=X goodput_mbps=X`, where a
// transmission is a packet starting onto a link and a datagram is one leaving a host.
//
// Usage: ns3-dumbbell [duration_s [tcp|udp]] (10 s of TCP by default).

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

using namespace ns3;

static uint64_t g_transmissions = 0;
static uint64_t g_datagrams = 0;

static void OnPhyTxBegin(Ptr<const Packet>) { ++g_transmissions; }
static void OnHostTx(Ptr<const Packet>) { ++g_datagrams; }

static double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  double duration = argc > 1 ? atof(argv[1]) : 10.0;
  if (!(duration > 1.0)) {
    fprintf(stderr, "ns3-dumbbell: the duration must be a number of seconds above 1\n");
    return 2;
  }
  std::string mode = argc > 2 ? argv[2] : "tcp";
  if (mode != "tcp" && mode != "udp") {
    fprintf(stderr, "ns3-dumbbell: the mode must be tcp or udp, not %s\n", mode.c_str());
    return 2;
  }
  const char *factory = mode == "tcp" ? "ns3::TcpSocketFactory" : "ns3::UdpSocketFactory";
  Config::SetDefault("ns3::TcpL4Protocol::SocketType", StringValue("ns3::TcpNewReno"));
  Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1405));
  Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(32 << 20));
  Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(32 << 20));
  Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(2));

  NodeContainer senders(2), router(1), receiver(1);
  InternetStackHelper stack;
  stack.InstallAll();

  PointToPointHelper access;
  access.SetDeviceAttribute("DataRate", StringValue("10Gbps"));
  access.SetChannelAttribute("Delay", StringValue("0ms"));
  access.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("64p"));
  PointToPointHelper bottleneck;
  bottleneck.SetDeviceAttribute("DataRate", StringValue("1Gbps"));
  bottleneck.SetChannelAttribute("Delay", StringValue("5ms"));
  bottleneck.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("1000p"));

  NetDeviceContainer all;
  Ipv4AddressHelper ip;
  NetDeviceContainer hostDevices;
  for (uint32_t i = 0; i < 2; ++i) {
    NetDeviceContainer d = access.Install(senders.Get(i), router.Get(0));
    char base[32];
    snprintf(base, sizeof base, "10.1.%u.0", i + 1);
    ip.SetBase(base, "255.255.255.0");
    ip.Assign(d);
    all.Add(d);
    hostDevices.Add(d.Get(0));
  }
  NetDeviceContainer b = bottleneck.Install(router.Get(0), receiver.Get(0));
  ip.SetBase("10.2.1.0", "255.255.255.0");
  Ipv4InterfaceContainer bi = ip.Assign(b);
  all.Add(b);
  hostDevices.Add(b.Get(1));
  // The device queues above are the only queues, as in ctp-sim (no queue disc on top).
  TrafficControlHelper tch;
  tch.Uninstall(all);
  Ipv4GlobalRoutingHelper::PopulateRoutingTables();

  ApplicationContainer sinks;
  for (uint32_t i = 0; i < 2; ++i) {
    uint16_t port = 5000 + i;
    PacketSinkHelper sink(factory, InetSocketAddress(Ipv4Address::GetAny(), port));
    sinks.Add(sink.Install(receiver.Get(0)));
    ApplicationContainer app;
    InetSocketAddress to(bi.GetAddress(1), port);
    if (mode == "tcp") {
      BulkSendHelper bulk(factory, to);
      bulk.SetAttribute("MaxBytes", UintegerValue(0));
      bulk.SetAttribute("SendSize", UintegerValue(1 << 16));
      app = bulk.Install(senders.Get(i));
    } else {
      OnOffHelper cbr(factory, to);
      cbr.SetConstantRate(DataRate("495Mbps"), 1405);
      app = cbr.Install(senders.Get(i));
    }
    app.Start(Seconds(i == 0 ? 0.0 : 1.0));
  }
  sinks.Start(Seconds(0.0));

  for (uint32_t i = 0; i < all.GetN(); ++i) {
    all.Get(i)->TraceConnectWithoutContext("PhyTxBegin", MakeCallback(&OnPhyTxBegin));
  }
  for (uint32_t i = 0; i < hostDevices.GetN(); ++i) {
    hostDevices.Get(i)->TraceConnectWithoutContext("MacTx", MakeCallback(&OnHostTx));
  }

  Simulator::Stop(Seconds(duration));
  double t0 = CpuSeconds();
  Simulator::Run();
  double cpu = CpuSeconds() - t0;
  uint64_t delivered = 0;
  for (uint32_t i = 0; i < sinks.GetN(); ++i) {
    delivered += DynamicCast<PacketSink>(sinks.Get(i))->GetTotalRx();
  }
  Simulator::Destroy();
  printf("transmissions=%llu datagrams=%llu cpu_s=%.3f goodput_mbps=%.1f\n",
         (unsigned long long)g_transmissions, (unsigned long long)g_datagrams, cpu,
         delivered * 8.0 / duration / 1e6);
  return 0;
}
