// The URL address policy as a pure function: no connection is ever made here.
import { describe, expect, test } from "bun:test";
import { addressRefusal, classifyAddress, hostRefusal } from "../../src/media/address";

const open = { publicOnly: false };
const strict = { publicOnly: true };

describe("address classes", () => {
  const table: Array<[string, string]> = [
    ["8.8.8.8", "public"],
    ["2606:4700:4700::1111", "public"],
    ["127.0.0.1", "loopback"],
    ["127.8.9.10", "loopback"],
    ["::1", "loopback"],
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["172.32.0.1", "public"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "cgnat"],
    ["169.254.169.254", "metadata"],
    ["169.254.1.1", "link-local"],
    ["100.100.100.200", "metadata"],
    ["fd00:ec2::254", "metadata"],
    ["FD00:EC2:0:0:0:0:0:254", "metadata"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["fd12:3456::1", "unique-local"],
    ["0.0.0.0", "unspecified"],
    ["::", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["ff02::1", "multicast"],
    ["255.255.255.255", "reserved"],
    // IPv4 hidden in IPv6 forms decides where the connection goes.
    ["::ffff:169.254.169.254", "metadata"],
    ["::ffff:a9fe:a9fe", "metadata"],
    ["::ffff:127.0.0.1", "loopback"],
    ["64:ff9b::a9fe:a9fe", "metadata"],
    ["2002:a9fe:a9fe::1", "metadata"],
    ["::169.254.169.254", "metadata"],
    ["not an address", "reserved"],
  ];
  for (const [ip, cls] of table) test(`${ip} -> ${cls}`, () => expect(classifyAddress(ip)).toBe(cls as never));
});

describe("refusal policy", () => {
  test("link-local and metadata are refused by default and with public-only", () => {
    for (const ip of ["169.254.169.254", "169.254.0.1", "fd00:ec2::254", "100.100.100.200", "fe80::abcd", "::ffff:169.254.169.254", "0.0.0.0"]) {
      expect(addressRefusal(ip, open)).not.toBeNull();
      expect(addressRefusal(ip, strict)).not.toBeNull();
    }
  });

  test("by default loopback and private addresses are allowed (tests fetch from 127.0.0.1)", () => {
    for (const ip of ["127.0.0.1", "::1", "10.0.0.5", "192.168.0.2", "fd12::1", "100.64.1.1", "8.8.8.8"]) expect(addressRefusal(ip, open)).toBeNull();
  });

  test("public-only refuses everything but public addresses", () => {
    for (const ip of ["127.0.0.1", "::1", "10.0.0.5", "192.168.0.2", "fd12::1", "100.64.1.1", "::ffff:10.0.0.1", "192.0.2.1"]) {
      expect(addressRefusal(ip, strict)).toContain("media-url-public-only");
    }
    expect(addressRefusal("8.8.8.8", strict)).toBeNull();
    expect(addressRefusal("2606:4700:4700::1111", strict)).toBeNull();
  });

  test("metadata host names are refused before any lookup", () => {
    expect(hostRefusal("metadata.google.internal")).toContain("metadata");
    expect(hostRefusal("METADATA.GOOGLE.INTERNAL.")).toContain("metadata");
    expect(hostRefusal("example.com")).toBeNull();
  });
});
