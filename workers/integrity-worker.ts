import { checkOutputs, type IntegrityBatchResult, type IntegrityTask } from '../src/report/integrity-check.js';

/** Piscina task: check one batch of finished requests against the reference model. */
export default function checkIntegrityBatch(task: IntegrityTask): IntegrityBatchResult {
  return checkOutputs(task.shape, task.items);
}
