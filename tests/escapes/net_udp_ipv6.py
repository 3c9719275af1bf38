# Send UDP and TCP to the host over IPv4 and IPv6 loopback (argv[1] = port).
import socket
import sys

port = int(sys.argv[1])
for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    try:
        socket.socket(family, socket.SOCK_DGRAM).sendto(b"x", (host, port))
    except OSError as e:
        print("blocked udp:", e)
    try:
        socket.create_connection((host, port), timeout=2)
        print("ESCAPED: TCP to", host)
    except OSError as e:
        print("blocked tcp:", e)
print("probe-ran")
