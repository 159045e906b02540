// Runs functions of attnlab/web/static/engine/lessonmath.js on cases read as JSON from stdin and
// writes one JSON answer per case to stdout: {ok: result} or {error: message}. Used by
// tests/web/lesson/test_lessonmath_parity.py. Input: {"fn": NAME, "cases": [args, ...]}; an argument
// {"$float": "nan" | "inf" | "-inf"} stands for a number JSON cannot carry.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const MODULE = join(here, "..", "..", "attnlab", "web", "static", "engine", "lessonmath.js");
const M = await import(pathToFileURL(MODULE).href);

const FLOATS = { nan: NaN, inf: Infinity, "-inf": -Infinity };
const revive = (key, value) =>
  value && typeof value === "object" && !Array.isArray(value) && "$float" in value ? FLOATS[value.$float] : value;

const { fn, cases } = JSON.parse(readFileSync(0, "utf-8"), revive);
const answers = cases.map((args) => {
  try {
    return { ok: M[fn](args) };
  } catch (err) {
    return { error: err.message };
  }
});
process.stdout.write(JSON.stringify(answers));
