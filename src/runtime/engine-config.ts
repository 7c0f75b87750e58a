import { blockHashKeyEnvironmentProblem } from '../core/block-hash.js';
import { ConfigError } from '../core/errors.js';
import { engineConfigSchema, type EngineConfigInput, type EngineSettings } from '../config/engine-schema.js';
import { defaultMaxModelLen, engineRuleIssue } from '../config/engine-rules.js';
import { describeConfigIssue, invalidSetting, issueFromZod, objectNaming, type ConfigIssue } from '../config/issues.js';
import { isModelPresetName, MODEL_PRESET_NAMES, MODEL_PRESETS } from '../model/presets.js';
import type { ModelShape } from '../model/shape.js';
import { remoteTierSettings, type RemoteTierSettings } from '../remote/remote-settings.js';

export { engineConfigSchema } from '../config/engine-schema.js';

/** The engine configuration with every default applied and the model resolved. */
export type EngineConfig = Readonly<
  Omit<EngineSettings, 'model' | 'maxModelLen' | 'computeNsPerToken' | RemoteKey> & {
    /** The model's shape, with computeNsPerToken applied when the config set it. */
    model: ModelShape;
    /** As given, or the GPU KV cache's capacity up to 131072 tokens. */
    maxModelLen: number;
    /** Offloading is on when enabled and a CPU capacity was given. */
    offload: boolean;
    /** The remote tier behind the CPU tier, its keys checked; null without one. */
    remote: RemoteTierSettings | null;
  }
>;

/** The remote tier's keys, which resolve into one `remote` setting. */
type RemoteKey =
  | 'remote'
  | 'remotePolicy'
  | 'remoteTimeoutMs'
  | 'remoteWriteAttempts'
  | 'remoteRetryBackoffMs'
  | 'remoteNamespace'
  | 'remoteSecret'
  | 'remoteSecretFile'
  | 'remoteEncrypt';

/** Validates a config and applies defaults; errors name the setting and its value. */
export function resolveEngineConfig(input: EngineConfigInput): EngineConfig {
  const fail = (issue: ConfigIssue): never => {
    throw new ConfigError(`invalid engine config: ${describeConfigIssue(issue, objectNaming(input))}`);
  };
  const parsed = engineConfigSchema.safeParse(input);
  if (!parsed.success) return fail(issueFromZod(parsed.error.issues[0]));
  // A malformed secret key must stop the engine rather than leave hashes under the public one.
  const keyProblem = blockHashKeyEnvironmentProblem();
  if (keyProblem !== null) throw new ConfigError(`invalid environment: ${keyProblem}`);
  const {
    model: modelSetting,
    computeNsPerToken,
    maxModelLen: givenModelLen,
    remote: remoteUrl,
    remotePolicy,
    remoteTimeoutMs,
    remoteWriteAttempts,
    remoteRetryBackoffMs,
    remoteNamespace,
    remoteSecret,
    remoteSecretFile,
    remoteEncrypt,
    ...settings
  } = parsed.data;

  let model: ModelShape;
  if (typeof modelSetting === 'string') {
    if (!isModelPresetName(modelSetting)) return fail(invalidSetting('model', `expected a model preset (${MODEL_PRESET_NAMES.join(', ')}) or a model shape`));
    model = MODEL_PRESETS[modelSetting];
  } else {
    model = modelSetting;
  }
  if (computeNsPerToken !== undefined) model = { ...model, computeNsPerToken };
  if (settings.cpuBlocks !== undefined && settings.cpuBytes !== undefined) {
    return fail(invalidSetting('cpuBytes', 'cpuBlocks is given too: give one of them, not both'));
  }
  const maxModelLen = givenModelLen ?? defaultMaxModelLen(settings.gpuBlocks, settings.blockSize);
  const offload = settings.offload && ((settings.cpuBlocks ?? 0) > 0 || (settings.cpuBytes ?? 0) > 0);
  const issue = engineRuleIssue({ ...settings, model, maxModelLen, cpuBytes: offload ? settings.cpuBytes : undefined });
  if (issue !== null) return fail(issue);
  const remote = remoteTierSettings(
    { remote: remoteUrl, remotePolicy, remoteTimeoutMs, remoteWriteAttempts, remoteRetryBackoffMs, remoteNamespace, remoteSecret, remoteSecretFile, remoteEncrypt },
    model,
    offload,
  );
  return { ...settings, model, maxModelLen, offload, remote };
}
