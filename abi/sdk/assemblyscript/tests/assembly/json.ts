// Unit tests of assembly/json.ts, run by tests/run.mjs: jsonTests returns 0,
// or the number of the first check that failed.
import { jsonField, JSON_MAX_DEPTH } from "../../assembly/index";
export * from "../../assembly/exports";

function utf8(s: string): Uint8Array { return Uint8Array.wrap(String.UTF8.encode(s)); }
function raw(v: string, key: string): string {
  const f = jsonField(utf8(v), key);
  if (f.error !== null) return "error";
  if (!f.found) return "absent";
  const b = f.raw!;
  return String.UTF8.decode(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
}

export function jsonTests(): i32 {
  const v = ' { "a" : {"x":[1,{"y":"}"}]}, "s":"q\\"x", "amount": -1.5e2 ,"t":true, "u":"ann"} ';
  if (raw(v, "amount") != "-1.5e2") return 1;
  if (jsonField(utf8(v), "amount").asNumber() != -150) return 2;
  if (!jsonField(utf8(v), "amount").isNumber()) return 3;
  if (raw(v, "a") != '{"x":[1,{"y":"}"}]}') return 4;
  if (raw(v, "x") != "absent") return 5;
  if (jsonField(utf8(v), "t").isNumber()) return 6;
  if (jsonField(utf8(v), "s").asString() !== null) return 7;
  if (jsonField(utf8(v), "u").asString() != "ann") return 8;
  if (raw("{}", "a") != "absent") return 9;
  const bad = ["", "[1]", '"a"', '{"a"}', '{"a":}', '{"a":1', '{"a":1 "b":2}', '{"a":[1 2]}'];
  for (let i = 0; i < bad.length; i++) if (raw(bad[i], "b") != "error") return 10 + i;
  if (jsonField(null, "a").error === null) return 20;
  if (raw('{"a":' + "[".repeat(JSON_MAX_DEPTH + 1) + "]".repeat(JSON_MAX_DEPTH + 1) + "}", "b") != "error") return 21;
  if (raw('{"a":' + "[".repeat(JSON_MAX_DEPTH) + "]".repeat(JSON_MAX_DEPTH) + "}", "b") != "absent") return 22;
  if (jsonField(utf8('{"amount":"12"}'), "amount").isNumber()) return 23;
  return 0;
}
