// The JavaScript lint (`make lint-js`): ESLint's recommended rules over every file of the web
// explorer and the lesson. The widgets and the lesson are classic scripts that share window
// globals (attnlab's own namespaces, declared below); the in-page engine (static/engine/) is ES
// modules, and so are the Node scripts that the parity tests run against it (tests/js/).
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    files: ["attnlab/web/static/**/*.js"],
    ignores: ["attnlab/web/static/engine/**"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "script",
      globals: { ...globals.browser },
    },
    rules: {
      // The explorer ignores some errors on purpose (no localStorage in a private window, an
      // optional request that failed: the page goes on without it); the unused `catch (err)`
      // binding there is not a defect, so only unused catch bindings are let through.
      "no-unused-vars": ["error", { caughtErrors: "none" }],
    },
  },
  {
    files: ["attnlab/web/static/engine/**/*.js", "tests/js/**/*.mjs", "eslint.config.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: { ...globals.browser },
    },
  },
  {
    files: ["tests/js/**/*.mjs"],
    languageOptions: { globals: { ...globals.node } },
  },
];
