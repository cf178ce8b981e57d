// kiln's gpu-run Statement (schema/ATTESTATION.md) as a test writes it by hand: one test of a run
// on a GPU of `arch`, compute capability `cc` and driver `driver`, for the archive `digest`. The
// store, runtime and GPU tests sign it into a DSSE envelope to exercise the policies that read it.
#pragma once

#include <string>

namespace kiln::test {

inline std::string gpu_run_statement_text(const std::string& digest, const std::string& arch, const std::string& cc,
                                          bool passed, const std::string& driver = "13.0") {
  return R"({"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"a.kiln","digest":{"sha256":")" +
         digest.substr(7) + R"("}}],"predicateType":"urn:kiln:attestation:gpu-run:v1","predicate":{"kiln":"0.6.0",)"
         R"("ran_at":1796200000,"archive":{"package":"scale","kernel_revision":"v1","sequence":1},"device":{"vendor":"cuda",)"
         R"("name":"GPU )" + arch + R"(","arch":")" + arch + R"(","compute_capability":")" + cc + R"(","driver":")" +
         driver + R"(","memory_bytes":1},"results":[{"kernel":"k","test":"t","passed":)" + (passed ? "true" : "false") +
         R"(}],"passed":)" + (passed ? "true" : "false") + "}}";
}

}  // namespace kiln::test
