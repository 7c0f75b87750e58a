# kvtier_host is always built. kvtier_cuda (the same sources plus the CUDA
# backend) is built when native/scripts/build.mjs finds nvcc and sets
# kvtier_cuda=1 with the toolkit paths in GYP_DEFINES.
{
  'variables': {
    'kvtier_cuda%': 0,
    'kvtier_nvcc%': 'nvcc',
    'kvtier_cuda_include%': '/usr/local/cuda/include',
    'kvtier_cudart_static%': '/usr/local/cuda/lib64/libcudart_static.a',
    'kvtier_sources': [
      'src/addon.cc',
      'src/copy_method.cc',
      'src/crc32c.cc',
      'src/device_block_checksum.cc',
      'src/device_completions.cc',
      'src/device_compute.cc',
      'src/device_jobs.cc',
      'src/device_options.cc',
      'src/device_wrap.cc',
      'src/fault_injector.cc',
      'src/forward_batch.cc',
      'src/host_backend.cc',
      'src/host_model.cc',
      'src/host_stream.cc',
      'src/id_interval_set.cc',
      'src/js_args.cc',
      'src/kv_geometry.cc',
      'src/transfer_plan.cc',
    ],
  },
  'target_defaults': {
    # A worker can be terminated in the middle of a call into the addon; its
    # errors then cannot be thrown into JS and must not abort the process.
    'defines': ['NAPI_VERSION=8', 'NODE_ADDON_API_DISABLE_DEPRECATED', 'NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS'],
    'include_dirs': ['src'],
    'dependencies': [
      "<!(node -p \"require('node-addon-api').targets\"):node_addon_api_except_all",
    ],
    'cflags_cc': ['-std=c++17', '-O3', '-Wall', '-Wextra', '-Wno-unused-parameter'],
    'cflags_cc!': ['-std=gnu++17', '-fno-exceptions'],
    'ldflags': ['-pthread'],
  },
  'targets': [
    {
      'target_name': 'kvtier_host',
      'sources': ['<@(kvtier_sources)'],
    },
  ],
  'conditions': [
    ['kvtier_cuda==1', {
      'targets': [
        {
          'target_name': 'kvtier_cuda',
          'sources': [
            '<@(kvtier_sources)', 'src/copy_descriptors.cc', 'src/forward_pack.cc',
            'src/cuda_backend.cu', 'src/cuda_kernels.cu', 'src/cuda_poller.cu',
          ],
          'defines': ['KVTIER_WITH_CUDA=1'],
          'include_dirs': ['<(kvtier_cuda_include)'],
          # Static runtime: the addon loads on machines without a CUDA install
          # and reports zero devices there.
          'libraries': ['<(kvtier_cudart_static)', '-ldl', '-lrt', '-lpthread'],
          'rules': [
            {
              'rule_name': 'nvcc',
              'extension': 'cu',
              'inputs': [
                'src/backend.h', 'src/copy_descriptors.h', 'src/copy_method.h', 'src/cuda_backend.h', 'src/cuda_check.cuh',
                'src/cuda_copy_kernels.cuh', 'src/cuda_kernels.cuh', 'src/cuda_model_kernels.cuh', 'src/cuda_poller.cuh',
                'src/cuda_staging.cuh', 'src/device_forward_batch.h', 'src/forward_batch.h', 'src/forward_pack.h',
                'src/kv_geometry.h', 'src/poison.h', 'src/reference_model.h', 'src/transfer_plan.h',
              ],
              'outputs': ['<(INTERMEDIATE_DIR)/<(RULE_INPUT_ROOT).o'],
              'action': [
                '<(kvtier_nvcc)', '-std=c++17', '-O3',
                # Turing (T4) is the oldest GPU CUDA 13 runs on; Ampere and Ada
                # run the sm_80 code, Hopper sm_90, newer GPUs JIT the PTX.
                '-gencode', 'arch=compute_75,code=sm_75',
                '-gencode', 'arch=compute_80,code=sm_80',
                '-gencode', 'arch=compute_90,code=sm_90',
                '-gencode', 'arch=compute_90,code=compute_90',
                '-Xcompiler', '-fPIC',
                '-DKVTIER_WITH_CUDA=1',
                '-Isrc',
                '-c', '<(RULE_INPUT_PATH)',
                '-o', '<@(_outputs)',
              ],
              'message': 'nvcc <(RULE_INPUT_PATH)',
              'process_outputs_as_sources': 1,
            },
          ],
        },
      ],
    }],
  ],
}
