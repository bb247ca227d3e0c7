# Captures the first request frame a real client sends (size prefix stripped) as hex:
#   python3 capture_first_frame.py out.hex & kcat -b 127.0.0.1:19391 -L
# kcat_api_versions_v3_request.hex is librdkafka 2.0.2's (kcat) opening ApiVersions v3 request.
import socket, struct, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 19391)); s.listen(1); s.settimeout(20)
c, _ = s.accept(); c.settimeout(10)
def readn(n):
    b = b""
    while len(b) < n:
        x = c.recv(n - len(b))
        if not x: raise SystemExit("eof")
        b += x
    return b
n = struct.unpack(">i", readn(4))[0]
frame = readn(n)
open(sys.argv[1], "w").write(frame.hex() + "\n")
c.close(); s.close()
