#!/usr/bin/env bun
// Entry point: flags + INFINITY_* environment + config file -> one typed Config -> server.
// Bad options end with a one-line message and exit code 2, never a stack trace.
import { existsSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { apiKeyFileOption, buildConfig, helpText, parseArgv, type ServerConfig } from "./config";
import { ConfigError, ModelLoadError } from "./errors";
import { configureLog, log } from "./log";
import { hubSettingsFromEnv, resolveModel } from "./model/resolve";
import { prepareGraph } from "./model/build";
import { startServer } from "./server/serve";
import { platformStart } from "./platform";

export { VERSION } from "./version";
import { VERSION } from "./version";

function readConfigFile(path: string): Record<string, unknown> {
  if (!existsSync(path)) throw new ConfigError(`config file not found: ${path}`);
  try {
    return Bun.TOML.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  } catch (e) {
    throw new ConfigError(`config file ${path} is not valid TOML: ${(e as Error).message}`);
  }
}

function readKeyFile(path: string): string[] {
  if (!existsSync(path)) throw new ConfigError(`API key file not found: ${path}`);
  return readFileSync(path, "utf8")
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
}

/** Everything from argv and env to a Config; exported for tests. */
export function loadConfig(argv: string[], env: Record<string, string | undefined>): { config: ServerConfig | null; help: boolean; version: boolean } {
  // `v2` (Infinity's CLI) and `serve` (SageMaker's start) are entries, not options; a platform's variables fill in
  // the port and the model where nothing explicit does.
  const start = platformStart(argv, env, existsSync);
  env = start.env;
  const { flags, help, version } = parseArgv(start.args);
  if (help || version) return { config: null, help, version };
  const configPath = flags.get("config")?.[0] ?? env.INFINITY_CONFIG;
  const file = configPath ? readConfigFile(configPath) : null;
  const sources = { flags, env, file, cpuCount: availableParallelism() };
  const config = buildConfig(sources);
  const keyFile = apiKeyFileOption(sources);
  if (keyFile) config.apiKeys = [...config.apiKeys, ...readKeyFile(keyFile)];
  if (config.apiKeys.some((k) => k.length === 0)) throw new ConfigError("an API key must not be empty");
  return { config, help, version };
}

export async function main(argv: string[], env: Record<string, string | undefined>): Promise<number> {
  let loaded;
  try {
    loaded = loadConfig(argv, env);
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`infinity: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  if (loaded.help) {
    process.stdout.write(helpText() + "\n");
    return 0;
  }
  if (loaded.version) {
    process.stdout.write(`infinity ${VERSION}\n`);
    return 0;
  }
  const config = loaded.config!;
  configureLog(config.logLevel, config.logFormat);
  const hub = hubSettingsFromEnv(env, config.cacheDir);

  if (config.preloadOnly) {
    try {
      // Built graphs are built now too, so an image baked with --preload-only starts from its cache.
      await Promise.all(config.models.map(async (m) => {
        const r = await resolveModel(m.modelId, m.revision, m.dtype, hub, m.graph);
        prepareGraph(r.dir, r.files, m.modelId, m.graph, m.dtype, hub.cacheDir);
      }));
    } catch (e) {
      log.error((e as Error).message);
      return 1;
    }
    log.info("preload done", { models: config.models.length });
    return 0;
  }

  const server = startServer(config, hub);
  let exiting = false;
  const stop = (signal: string) => {
    if (exiting) return;
    exiting = true;
    log.info("shutting down", { signal });
    void server.shutdown().then(() => process.exit(0));
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  try {
    await server.loaded;
  } catch (e) {
    const msg = e instanceof ModelLoadError ? e.message : (e as Error).stack ?? String(e);
    log.error(msg);
    await server.shutdown().catch(() => {});
    return 1;
  }
  log.info("ready", { models: config.models.map((m) => m.servedModelName) });
  return -1; // keep running
}

if (import.meta.main) {
  const code = await main(process.argv.slice(2), process.env);
  if (code >= 0) process.exit(code);
}
