// Python's idea of white space, for the engine's ports of attnlab's text handling: str.split()
// and str.strip() split on a set of characters that JavaScript's \s and trim() do not match
// exactly (\s lacks \x1c-\x1f and \x85; it adds U+FEFF, which Python keeps).
// Shape: no tensors (strings in, strings out).

// The characters str.split() splits on (the information separators \x1c-\x1f are among them).
const SPACE_CLASS = "[\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";

/** One or more of Python's white-space characters. Shape: no tensors. */
export const PY_SPACE = new RegExp(`${SPACE_CLASS}+`, "u");
const EDGES = new RegExp(`^${SPACE_CLASS}+|${SPACE_CLASS}+$`, "gu");

/** Python's text.split(): the words between runs of white space, no empty ones. Shape: no tensors. */
export const pySplit = (text) => text.split(PY_SPACE).filter((w) => w.length > 0);

/** Python's text.strip(): white space removed from both ends. Shape: no tensors. */
export const pyStrip = (text) => text.replace(EDGES, "");
