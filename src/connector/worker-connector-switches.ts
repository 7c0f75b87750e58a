/**
 * Test-only switches that turn off one reference behaviour each, so scenario
 * tests can show that the behaviour is what keeps outputs correct.
 */
export interface WorkerConnectorSwitches {
  /** Do not flush preempted requests' stores before this step's writes. */
  readonly skipPreemptionFlush?: boolean;
  /** Submit stores without ordering them after the compute that wrote their blocks. */
  readonly storesIgnoreCompute?: boolean;
  /** Submit stores right after the forward that computed them instead of at the next step's start. */
  readonly submitStoresImmediately?: boolean;
  /** Keep a log of every submission (for ordering assertions). */
  readonly recordTransfers?: boolean;
  /** Report failed stores as ok, so the scheduler takes their (poisoned) CPU blocks for KV. */
  readonly reportFailedStoresAsOk?: boolean;
  /** On a reset, forget in-flight jobs without waiting for them (they then land after the reset). */
  readonly resetWithoutDrain?: boolean;
  /** Submit every transfer job as its own copy job instead of coalescing those submitted together. */
  readonly separateCopyJobs?: boolean;
}
