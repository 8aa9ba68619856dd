// Which network addresses a media URL may be fetched from. Pure functions over address strings, so the policy is
// tested without connecting anywhere. Link-local and cloud metadata addresses (where instance credentials live)
// are always refused; with publicOnly, loopback, private, CGNAT, unique-local and other special ranges are too.
import { isIP } from "node:net";

export type AddressClass =
  | "public" | "loopback" | "private" | "cgnat" | "unique-local" | "special"
  | "link-local" | "metadata" | "unspecified" | "multicast" | "reserved";

/** Classes refused whatever the settings. */
const ALWAYS_REFUSED = new Set<AddressClass>(["link-local", "metadata", "unspecified", "multicast", "reserved"]);

/** Host names of cloud metadata services, refused before any lookup. */
export const METADATA_HOSTS = new Set(["metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal", "metadata.azure.internal"]);

function v4Parts(ip: string): number[] | null {
  const parts = ip.split(".").map(Number);
  return parts.length === 4 && parts.every((p) => Number.isInteger(p) && p >= 0 && p <= 255) ? parts : null;
}

function classifyV4([a, b, c, d]: number[]): AddressClass {
  if (a === 169 && b === 254) return b === 254 && c === 169 && d === 254 ? "metadata" : "link-local";
  if (a === 100 && b === 100 && c === 100 && d === 200) return "metadata"; // Alibaba Cloud
  if (a === 0) return "unspecified";
  if (a! >= 224 && a! <= 239) return "multicast";
  if (a! >= 240) return "reserved";
  if (a === 127) return "loopback";
  if (a === 10 || (a === 172 && b! >= 16 && b! <= 31) || (a === 192 && b === 168)) return "private";
  if (a === 100 && b! >= 64 && b! <= 127) return "cgnat";
  if ((a === 192 && b === 0 && (c === 0 || c === 2)) || (a === 198 && (b === 18 || b === 19)) || (a === 198 && b === 51 && c === 100) || (a === 203 && b === 0 && c === 113)) return "special";
  return "public";
}

/** Expands an IPv6 address into its eight 16-bit groups (an embedded dotted IPv4 tail included). */
function v6Groups(ip: string): number[] | null {
  let s = ip.toLowerCase().replace(/%.*$/, "");
  const v4 = s.match(/(\d+\.\d+\.\d+\.\d+)$/);
  if (v4) {
    const p = v4Parts(v4[1]!);
    if (!p) return null;
    s = s.slice(0, -v4[1]!.length) + `${((p[0]! << 8) | p[1]!).toString(16)}:${((p[2]! << 8) | p[3]!).toString(16)}`;
  }
  const halves = s.split("::");
  if (halves.length > 2) return null;
  const head = halves[0] ? halves[0].split(":") : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(":") : [];
  const fill = halves.length === 2 ? 8 - head.length - tail.length : 0;
  if (fill < 0) return null;
  const groups = [...head, ...Array(fill).fill("0"), ...tail].map((g) => parseInt(g, 16));
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : null;
}

export function classifyAddress(ip: string): AddressClass {
  const family = isIP(ip.replace(/%.*$/, ""));
  if (family === 4) return classifyV4(v4Parts(ip)!);
  if (family !== 6) return "reserved";
  const g = v6Groups(ip);
  if (!g) return "reserved";
  const embedded = (hi: number, lo: number) => classifyV4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  const zeroPrefix = (n: number) => g.slice(0, n).every((x) => x === 0);
  // IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an
  // IPv4 address that decides where the connection really goes.
  if (zeroPrefix(5) && g[5] === 0xffff) return embedded(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return embedded(g[6]!, g[7]!);
  if (g[0] === 0x2002) return embedded(g[1]!, g[2]!);
  if (zeroPrefix(7) && g[7] === 0) return "unspecified";
  if (zeroPrefix(7) && g[7] === 1) return "loopback";
  if (zeroPrefix(6)) return embedded(g[6]!, g[7]!);
  // AWS's IPv6 metadata endpoint fd00:ec2::254 sits inside the unique-local range.
  if (g[0] === 0xfd00 && g[1] === 0x0ec2 && g.slice(2, 7).every((x) => x === 0) && g[7] === 0x254) return "metadata";
  if ((g[0]! & 0xffc0) === 0xfe80) return "link-local";
  if ((g[0]! & 0xfe00) === 0xfc00) return "unique-local";
  if ((g[0]! & 0xff00) === 0xff00) return "multicast";
  if (g[0] === 0x2001 && g[1] === 0x0db8) return "special";
  return "public";
}

export interface AddressPolicy {
  /** Refuse everything that is not a public address. */
  publicOnly: boolean;
}

/** Null when the address may be fetched from, else why not. */
export function addressRefusal(ip: string, policy: AddressPolicy): string | null {
  const cls = classifyAddress(ip);
  if (ALWAYS_REFUSED.has(cls)) return `${ip} is a ${cls} address`;
  if (policy.publicOnly && cls !== "public") return `${ip} is a ${cls} address (--media-url-public-only)`;
  return null;
}

export function hostRefusal(host: string): string | null {
  const h = host.toLowerCase().replace(/\.$/, "");
  return METADATA_HOSTS.has(h) ? `${host} is a cloud metadata host` : null;
}
