// What ranks tell each other at the rendezvous survives the store's text,
// damaged records are refused, this rank's host names its namespaces; and
// every setting a transport reads is a row of the settings table.
#include "runtime/rank_facts.h"

#include <gtest/gtest.h>

#include "runtime/config.h"
#include "transport/kind.h"

namespace kolo {
namespace {

TEST(RankFacts, SurviveTheStore) {
  RankFacts f, g;
  f.host = "host|with;bars=and:colons";
  f.offers = {{"ib", "1"}, {"shm", "12345"}, {"tcp", ""}};
  ASSERT_TRUE(decode_rank_facts(encode_rank_facts(f), &g).is_ok());
  EXPECT_EQ(g.host, f.host);
  EXPECT_EQ(g.offers, f.offers);
  EXPECT_EQ(g.standby_store, "");
  f.offers.clear();
  f.standby_store = "10.0.0.7:41234";
  ASSERT_TRUE(decode_rank_facts(encode_rank_facts(f), &g).is_ok());
  EXPECT_TRUE(g.offers.empty());  // the standby store is no transport
  EXPECT_EQ(g.standby_store, f.standby_store);
}

TEST(RankFacts, DamagedRecordsAreRefusedNamingThem) {
  RankFacts g;
  for (const char* text : {"garbage", "", "5:abc", "3:abc;", "3:abc;=1", "3:abc;tcp=;tcp=", "3:abcx", ":abc"}) {
    const Status s = decode_rank_facts(text, &g);
    EXPECT_EQ(s.code(), Code::kInternal) << text;
    EXPECT_NE(s.message().find("malformed rank record"), std::string::npos) << s.message();
  }
}

TEST(RankFacts, LocalHostTellsNamespacesApart) {
  const std::string host = local_host("name");
  EXPECT_EQ(host.rfind("name:net", 0), 0u) << host;
  EXPECT_NE(host.find(":ipc"), std::string::npos) << host;
  EXPECT_NE(host.find(":pid"), std::string::npos) << host;
}

TEST(TransportSettings, EveryOneATransportReadsIsASetting) {
  const SettingValues values = setting_values(Config{});
  ASSERT_FALSE(transport_kinds().empty());
  for (const TransportKind* kind : transport_kinds()) {
    for (const std::string& variable : kind->settings()) {
      EXPECT_TRUE(values.has(variable)) << kind->name() << " reads " << variable << ", which is no setting";
    }
  }
  EXPECT_EQ(values.text("KOLO_TRANSPORT"), "auto");
  EXPECT_EQ(values.integer("KOLO_IB_GID_INDEX", 0), -1);
  EXPECT_EQ(values.number("KOLO_TIMEOUT_S", 0), 300);
}

}  // namespace
}  // namespace kolo
