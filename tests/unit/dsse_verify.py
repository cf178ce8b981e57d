#!/usr/bin/env python3
"""An independent DSSE v1 verifier for kiln's attestations, written from the DSSE specification
(github.com/secure-systems-lab/dsse, protocol.md) with python3-cryptography's Ed25519, sharing no
code with kiln: exit 0 when a signature by the given public key verifies over
PAE(payloadType, payload) and the payload is an in-toto Statement v1; 1 otherwise.

    dsse_verify.py ENVELOPE.json PUBLIC_KEY.pem
"""
import base64
import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import load_pem_public_key


def pae(payload_type: bytes, payload: bytes) -> bytes:
    return b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type, len(payload), payload)


def main():
    envelope = json.load(open(sys.argv[1], "rb"))
    key = load_pem_public_key(open(sys.argv[2], "rb").read())
    payload = base64.b64decode(envelope["payload"], validate=True)
    message = pae(envelope["payloadType"].encode(), payload)
    for s in envelope["signatures"]:
        try:
            key.verify(base64.b64decode(s["sig"], validate=True), message)
        except InvalidSignature:
            continue
        statement = json.loads(payload)
        if envelope["payloadType"] != "application/vnd.in-toto+json" or \
                statement.get("_type") != "https://in-toto.io/Statement/v1":
            print("signed, but not an in-toto Statement v1")
            return 1
        print("verified:", statement["subject"][0]["digest"]["sha256"], statement["predicateType"])
        return 0
    print("no signature verifies")
    return 1


if __name__ == "__main__":
    sys.exit(main())
