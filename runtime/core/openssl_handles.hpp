// Owning handles for the OpenSSL objects kiln_core creates: each frees its object with the
// matching OpenSSL call when it goes out of scope, error paths included.
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>

#include <memory>

namespace kiln {

struct OpensslFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, OpensslFree>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, OpensslFree>;
using BioPtr = std::unique_ptr<BIO, OpensslFree>;

}  // namespace kiln
