// The registry client's pure parts: references, challenges, docker config credentials, and the
// checks on a manifest someone else served.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <string>

#include "../unit/temp_dirs.hpp"
#include "core/error.hpp"
#include "core/sha256.hpp"
#include "registry/auth.hpp"
#include "registry/reference.hpp"
#include "store/oci_manifest.hpp"

namespace kiln {
namespace {

using registry::parse_reference;

const std::string kHex(64, 'a');

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Failure& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RegistryReference, ParsesTagsDigestsAndKilnDigests) {
  registry::Reference t = parse_reference("registry.example.com:5000/team/kernels/matmul:v1.2");
  EXPECT_EQ(t.registry, "registry.example.com:5000");
  EXPECT_EQ(t.repository, "team/kernels/matmul");
  EXPECT_EQ(t.tag, "v1.2");
  EXPECT_FALSE(t.is_loopback());
  registry::Reference d = parse_reference("127.0.0.1:5000/scale@sha256:" + kHex);
  EXPECT_EQ(d.digest, "sha256:" + kHex);
  EXPECT_TRUE(d.is_loopback());
  registry::Reference k = parse_reference("localhost/a-b__c.d@kiln:sha256:" + kHex);
  EXPECT_EQ(k.kiln_digest, "sha256:" + kHex);
  EXPECT_EQ(k.str(), "localhost/a-b__c.d@kiln:sha256:" + kHex);
  EXPECT_TRUE(k.is_loopback());
  EXPECT_TRUE(parse_reference("[::1]:5000/x:y").is_loopback());
  EXPECT_TRUE(parse_reference("127.1.2.3:80/x:y").is_loopback());
  EXPECT_FALSE(parse_reference("127.example.com/x:y").is_loopback());  // a name can point anywhere
  EXPECT_FALSE(parse_reference("localhost.example.com/x:y").is_loopback());
}

TEST(RegistryReference, RefusesWhatIsNotAReferenceSayingWhichPart) {
  EXPECT_NE(error_of([] { parse_reference("scale:v1"); }).find("no registry"), std::string::npos);
  EXPECT_NE(error_of([] { parse_reference("reg/Upper:v1"); }).find("'Upper' is not a repository"), std::string::npos);
  EXPECT_NE(error_of([] { parse_reference("reg/a//b:v1"); }).find("is not a repository"), std::string::npos);
  EXPECT_NE(error_of([] { parse_reference("reg/a:-v1"); }).find("'-v1' is not a tag"), std::string::npos);
  EXPECT_NE(error_of([] { parse_reference("reg/a@sha256:ABC"); }).find("the digest is not"), std::string::npos);
  EXPECT_NE(error_of([] { parse_reference("reg/a@kiln:sha512:" + kHex); }).find("the kiln digest is not"), std::string::npos);
  EXPECT_NE(error_of([] { parse_reference("reg/a:t@sha256:" + kHex); }).find("both a tag and a digest"), std::string::npos);
  EXPECT_NE(error_of([] { parse_reference("re g/a:t"); }).find("not a host[:port]"), std::string::npos);
  EXPECT_NE(error_of([] { parse_reference("reg:/a:t"); }).find("not a host[:port]"), std::string::npos);
  EXPECT_TRUE(registry::is_valid_tag(std::string(128, 'a')));
  EXPECT_FALSE(registry::is_valid_tag(std::string(129, 'a')));
}

TEST(RegistryAuth, ParsesBearerAndBasicChallenges) {
  auto c = registry::parse_challenge(
      R"(Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull,push")");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->scheme, "bearer");
  EXPECT_EQ(c->params["realm"], "https://auth.example.com/token");
  EXPECT_EQ(c->params["scope"], "repository:a/b:pull,push");
  auto b = registry::parse_challenge("Basic realm=\"kiln\"");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->scheme, "basic");
  EXPECT_FALSE(registry::parse_challenge("Bearer realm=\"unterminated"));
  EXPECT_FALSE(registry::parse_challenge(""));
}

TEST(RegistryAuth, Base64RoundTripsAndRefusesNonCanonicalInput) {
  for (const std::string& s : {std::string(""), std::string("f"), std::string("fo"), std::string("foo"), std::string("user:p\xff")}) {
    EXPECT_EQ(registry::base64_decode(registry::base64_encode(s)), s);
  }
  EXPECT_EQ(registry::base64_encode("user:pass"), "dXNlcjpwYXNz");
  EXPECT_FALSE(registry::base64_decode("dXNlcjpwYXN"));   // length
  EXPECT_FALSE(registry::base64_decode("dXNl=jpw"));      // padding inside
  EXPECT_FALSE(registry::base64_decode("dXNl!jpw"));      // alphabet
}

TEST(RegistryAuth, DockerConfigCredentialsByRegistryInEveryKeyForm) {
  std::string dir = test::make_temp_dir("kiln-docker-config");
  ::setenv("DOCKER_CONFIG", dir.c_str(), 1);
  EXPECT_FALSE(registry::docker_credentials("reg.example.com"));  // no file: anonymous
  std::ofstream(dir + "/config.json") << R"({"auths":{"https://reg.example.com/v1/":{"auth":"dXNlcjpwYXNz"},)"
                                      << R"("other:5000":{"auth":"YTpiOmM="},"helper.example.com":{}},"credsStore":"x"})";
  auto a = registry::docker_credentials("reg.example.com");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->user, "user");
  EXPECT_EQ(a->password, "pass");
  auto b = registry::docker_credentials("other:5000");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->password, "b:c");  // only the first colon separates
  EXPECT_FALSE(registry::docker_credentials("helper.example.com"));
  std::ofstream(dir + "/config.json") << R"({"auths":{"bad.example.com":{"auth":"not base64!"}}})";
  EXPECT_NE(error_of([] { registry::docker_credentials("bad.example.com"); }).find("is not base64 of user:password"),
            std::string::npos);
  ::unsetenv("DOCKER_CONFIG");
}

// A manifest as kiln builds it, then one field changed at a time: each change refused, naming it.
TEST(ArtifactManifest, ReadsWhatItBuildsAndRefusesEveryOtherShape) {
  store::ArchiveInfo a{"sha256:" + kHex, "scale", "v1", 7, 100};
  store::BlobRef layer{"sha256:" + std::string(64, 'b'), 100};
  std::string m = store::artifact_manifest(a, layer);
  store::ArtifactClaims c = store::read_artifact_manifest(m, "m", 1000);
  EXPECT_EQ(c.kiln_digest, a.digest);
  EXPECT_EQ(c.package, "scale");
  EXPECT_EQ(c.kernel_revision, "v1");
  EXPECT_EQ(c.sequence, 7u);
  EXPECT_EQ(c.layer.digest, layer.digest);
  EXPECT_EQ(c.layer.size, 100u);
  EXPECT_EQ(c.config.digest, store::empty_config_blob().digest);

  auto changed = [&](const std::string& from, const std::string& to) {
    std::string copy = m;  // every occurrence: on the manifest and on its layer
    EXPECT_NE(copy.find(from), std::string::npos) << from;
    for (std::size_t at = 0; (at = copy.find(from, at)) != std::string::npos; at += to.size()) copy.replace(at, from.size(), to);
    return error_of([&] { store::read_artifact_manifest(copy, "m", 1000); });
  };
  EXPECT_NE(error_of([&] { store::read_artifact_manifest(m, "m", 99); }).find("over the limit of 99"), std::string::npos);
  EXPECT_NE(changed("\"schemaVersion\":2", "\"schemaVersion\":1").find("schemaVersion is not 2"), std::string::npos);
  EXPECT_NE(changed("image.manifest.v1+json", "image.index.v1+json").find("is not application/vnd.oci.image.manifest"),
            std::string::npos);
  EXPECT_NE(changed("\"artifactType\":\"application/vnd.kiln.archive.v2\"", "\"artifactType\":\"x/y\"").find("artifactType 'x/y'"),
            std::string::npos);
  EXPECT_NE(changed("\"size\":2", "\"size\":3").find("not the empty blob"), std::string::npos);
  EXPECT_NE(changed(std::string(64, 'b'), std::string(63, 'b') + "B").find("layer: digest is not sha256"), std::string::npos);
  EXPECT_NE(changed("\"size\":100", "\"size\":-1").find("size missing or negative"), std::string::npos);
  EXPECT_NE(changed("\"mediaType\":\"application/vnd.kiln.archive.v2\"", "\"mediaType\":\"x/y\"").find("no layer of media type"),
            std::string::npos);
  // The layer's annotations say v1, the manifest's v2.
  std::size_t second = m.rfind("\"dev.kiln.kernel_revision\":\"v1\"");
  std::string split = m;
  split.replace(second, 31, "\"dev.kiln.kernel_revision\":\"v2\"");
  EXPECT_NE(error_of([&] { store::read_artifact_manifest(split, "m", 1000); }).find("differs between the manifest ('v2') and its layer ('v1')"),
            std::string::npos);
  EXPECT_NE(changed("\"dev.kiln.sequence\":\"7\"", "\"dev.kiln.sequence\":\"07\"").find("dev.kiln.sequence is not"),
            std::string::npos);
  EXPECT_NE(error_of([&] { store::read_artifact_manifest(std::string(store::kMaxOciManifest + 1, ' '), "m", 1000); })
                .find("over the limit"),
            std::string::npos);
  EXPECT_NE(error_of([&] { store::read_artifact_manifest("{\"schemaVersion\":2", "m", 1000); }).find("invalid JSON"),
            std::string::npos);
  EXPECT_EQ(store::kiln_digest_tag(a.digest), "kiln-" + kHex);
  EXPECT_TRUE(registry::is_valid_tag(store::kiln_digest_tag(a.digest)));
}

}  // namespace
}  // namespace kiln
