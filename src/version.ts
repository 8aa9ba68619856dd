// The release version (semver, CHANGELOG.md): `--version`, the OpenAPI document's info.version and TEI's /info.
// test/server/openapi.test.ts holds it equal to package.json's.
export const VERSION = "0.2.0";
