// Files imported as text (`with { type: "text" }`): Bun inlines them, in the compiled binary too.
declare module "swagger-ui-dist/swagger-ui-bundle.js" {
  const text: string;
  export default text;
}
declare module "swagger-ui-dist/swagger-ui.css" {
  const text: string;
  export default text;
}
// The playground page's files (src/server/playground/), served by routes/playground.ts.
declare module "*/playground/playground.js" {
  const text: string;
  export default text;
}
declare module "*/playground/playground.css" {
  const text: string;
  export default text;
}
declare module "*/playground/favicon.svg" {
  const text: string;
  export default text;
}
