"""Reads every record of every WARC in a WACZ with warcio, as the webrecorder tools read them, and prints
one JSON object: each record's type, target URI, HTTP status, payload SHA-256, offset and length in its
WARC (the gzip member warcio found it in), and whether its digests checked. Used by the host's tests
(native-host/tests/host/wacz.rs) to compare what warcio reads with what the bundle holds; Python because
warcio is the reference reader.

Usage: read_wacz.py FILE.wacz
"""

import hashlib
import json
import sys
import zipfile

from warcio.archiveiterator import ArchiveIterator


def records(wacz, name):
    with wacz.open(name) as stream:
        iterator = ArchiveIterator(stream, check_digests=True)
        for record in iterator:
            payload = record.content_stream().read()
            status = None
            if record.rec_type == "response" and record.http_headers is not None:
                status = int(record.http_headers.get_statuscode())
            yield {
                "warc": name,
                "type": record.rec_type,
                "uri": record.rec_headers.get_header("WARC-Target-URI"),
                "id": record.rec_headers.get_header("WARC-Record-ID"),
                "concurrent_to": record.rec_headers.get_header("WARC-Concurrent-To"),
                "status": status,
                "payload_sha256": hashlib.sha256(payload).hexdigest(),
                "offset": iterator.get_record_offset(),
                "length": iterator.get_record_length(),
                "digests_passed": record.digest_checker.passed,
                "digest_problems": list(record.digest_checker.problems),
            }


def main():
    with zipfile.ZipFile(sys.argv[1]) as wacz:
        warcs = [name for name in wacz.namelist() if name.startswith("archive/")]
        found = [record for name in warcs for record in records(wacz, name)]
    json.dump({"warcs": warcs, "records": found}, sys.stdout)


if __name__ == "__main__":
    main()
