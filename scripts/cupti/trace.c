// A kernel timeline for any CUDA process, captured graphs included: a CUDA injection
// library (the driver loads it when CUDA_INJECTION64_PATH names it, as Nsight Systems
// is loaded) that turns on CUPTI's concurrent-kernel, memcpy and memset activity and
// writes one CSV line per record to $CUPTI_TRACE_DIR/trace-<pid>.csv at exit:
//
//   kind,device,stream,start_ns,end_ns,correlation,graph_id,graph_node,name
//
// Kernels a graph launch runs share the launch's correlation id, so one replay is one
// correlation id. Concurrent-kernel records keep kernels concurrent (the serialising
// CUPTI_ACTIVITY_KIND_KERNEL is not used). Build: scripts/cupti/build.sh; read:
// scripts/cupti/summarize.py. CUPTI_TRACE_KERNELS_ONLY=1 leaves the memcpy and memset
// records out: recording each copy slows the copy engines' reduce-scatters (split DDP at
// world 4, xl bf16: 48.6 ms a traced step against 45.9 untraced; session 37).
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static FILE *out;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

#define CHECK(call)                                                           \
  do {                                                                        \
    CUptiResult r_ = (call);                                                  \
    if (r_ != CUPTI_SUCCESS) {                                                \
      const char *s_ = "?";                                                   \
      cuptiGetResultString(r_, &s_);                                          \
      fprintf(stderr, "cupti trace: %s failed: %s\n", #call, s_);             \
    }                                                                         \
  } while (0)

static void CUPTIAPI requested(uint8_t **buf, size_t *size, size_t *max) {
  *size = 16 << 20;
  *buf = aligned_alloc(8, *size);
  *max = 0;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buf,
                               size_t size, size_t valid) {
  (void)ctx;
  (void)stream;
  (void)size;
  CUpti_Activity *rec = NULL;
  pthread_mutex_lock(&lock);
  while (out && cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)rec;
      fprintf(out, "K,%u,%u,%llu,%llu,%u,%u,%llu,%s\n", k->deviceId, k->streamId,
              (unsigned long long)k->start, (unsigned long long)k->end,
              k->correlationId, k->graphId, (unsigned long long)k->graphNodeId,
              k->name ? k->name : "?");
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)rec;
      fprintf(out, "C,%u,%u,%llu,%llu,%u,%u,%llu,memcpy%u:%llu\n", m->deviceId,
              m->streamId, (unsigned long long)m->start, (unsigned long long)m->end,
              m->correlationId, m->graphId, (unsigned long long)m->graphNodeId,
              (unsigned)m->copyKind, (unsigned long long)m->bytes);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)rec;
      fprintf(out, "S,%u,%u,%llu,%llu,%u,%u,%llu,memset:%llu\n", m->deviceId,
              m->streamId, (unsigned long long)m->start, (unsigned long long)m->end,
              m->correlationId, m->graphId, (unsigned long long)m->graphNodeId,
              (unsigned long long)m->bytes);
      break;
    }
    default:
      break;
    }
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped);
  if (dropped && out)
    fprintf(out, "D,0,%u,0,0,0,0,0,dropped:%zu\n", stream, dropped);
  pthread_mutex_unlock(&lock);
  free(buf);
}

static void finish(void) {
  cuptiActivityFlushAll(1);
  pthread_mutex_lock(&lock);
  if (out) {
    fclose(out);
    out = NULL;
  }
  pthread_mutex_unlock(&lock);
}

int InitializeInjection(void) {
  const char *dir = getenv("CUPTI_TRACE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/trace-%d.csv", dir ? dir : ".", (int)getpid());
  out = fopen(path, "w");
  if (!out) {
    fprintf(stderr, "cupti trace: cannot write %s\n", path);
    return 0;
  }
  fprintf(out, "kind,device,stream,start_ns,end_ns,correlation,graph_id,graph_node,name\n");
  CHECK(cuptiActivityRegisterCallbacks(requested, completed));
  CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  const char *only = getenv("CUPTI_TRACE_KERNELS_ONLY");
  if (!only || only[0] != '1') {
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
  }
  atexit(finish);
  return 1;
}
