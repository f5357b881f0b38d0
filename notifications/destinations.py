"""Where a channel may send: the addresses a host name resolves to, and which of them are off limits.

A rule admin chooses a channel's URL, and the console's workers sit inside the site's network: without a check
a channel is a way to POST into that network (cloud metadata at 169.254.169.254, a database's admin port) and,
through the delivery log, to scan it. So loopback, link-local, private (RFC 1918), unique-local (fc00::/7),
unspecified, multicast and reserved addresses are refused unless they lie in NOTIFY_ALLOWED_NETWORKS (a site's
own Alertmanager is often on a private address). A host name is judged by every address it resolves to, when a
channel is saved and again before each try (DNS answers change); a try then connects to an address it checked
(notifications/senders `post`), so a second DNS answer cannot slip in between the check and the connection.
"""
import ipaddress
import socket
import threading

from django.conf import settings

# Private, shared (100.64/10), documentation, benchmarking and the like: not on the public internet.
NOT_GLOBAL = "reserved address"
UNIQUE_LOCAL = ipaddress.ip_network("fc00::/7")
RFC1918 = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


def refusal(address) -> str | None:
    """Why an IP address is not a destination ("private address"), or None when a channel may send to it."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if ip.version == 6 and ip.ipv4_mapped is not None:  # ::ffff:10.0.0.1 reaches 10.0.0.1
        ip = ip.ipv4_mapped
    if any(ip.version == network.version and ip in network for network in settings.NOTIFY_ALLOWED_NETWORKS):
        return None
    if ip.is_unspecified:
        return "unspecified address"
    if ip.is_loopback:
        return "loopback address"
    if ip.is_link_local:
        return "link-local address"
    if ip.is_multicast:
        return "multicast address"
    if ip.version == 6 and ip in UNIQUE_LOCAL:
        return "unique-local address"
    if ip.is_private and ip.version == 4 and any(ip in net for net in RFC1918):
        return "private address"
    if ip.is_reserved or not ip.is_global:
        return NOT_GLOBAL
    return None


def resolve(host: str, port: int, timeout: float) -> list[tuple]:
    """(family, sockaddr) for each address of `host`, in the resolver's order.

    TimeoutError after `timeout` seconds (the resolver's own timeouts are far longer than a try's deadline; the
    lookup is left to finish in its thread); OSError (socket.gaierror) when the name does not resolve.
    """
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:  # a literal address: nothing to look up
        return [(socket.AF_INET6, (str(ip), port, 0, 0)) if ip.version == 6 else (socket.AF_INET, (str(ip), port))]
    answer = {}

    def look_up():
        try:
            answer["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:  # UnicodeError: a name IDNA cannot encode
            answer["error"] = exc

    lookup = threading.Thread(target=look_up, name="notify-resolve", daemon=True)
    lookup.start()
    lookup.join(max(0.0, timeout))
    if lookup.is_alive():
        raise TimeoutError(f"no DNS answer within {timeout:g} s")
    if "error" in answer:
        raise socket.gaierror(str(answer["error"]))
    seen, found = set(), []
    for family, _type, _proto, _name, sockaddr in answer["infos"]:
        if family in (socket.AF_INET, socket.AF_INET6) and sockaddr not in seen:
            seen.add(sockaddr)
            found.append((family, sockaddr))
    if not found:
        raise socket.gaierror("no IPv4 or IPv6 address")
    return found


def address_of(sockaddr) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(sockaddr[0].split("%", 1)[0])  # a scoped fe80::1%eth0 is still link-local


def refusal_of(addresses: list[tuple]) -> str | None:
    """The first refusal among resolved addresses: one refused address refuses the host, whatever the others."""
    for _family, sockaddr in addresses:
        why = refusal(address_of(sockaddr))
        if why:
            return why
    return None
