// A small memset as a kernel node of a captured graph (src/graph/nodes.rs): `height` rows of
// `width` elements of `esize` bytes (1, 2 or 4), `pitch` bytes apart, set to `value`.
// In a replay a kernel follows a kernel within about 0.1 us; a memset node between two
// kernels costs some 4.6 us (session 24, call 119).
extern "C" __global__ void graph_memset(unsigned char *dst, unsigned long long pitch,
                                        unsigned int value, unsigned int esize,
                                        unsigned long long width, unsigned long long height) {
  const unsigned long long n = width * height;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    unsigned char *p = dst + (i / width) * pitch + (i % width) * esize;
    if (esize == 4)
      *(unsigned int *)p = value;
    else if (esize == 2)
      *(unsigned short *)p = (unsigned short)value;
    else
      *p = (unsigned char)value;
  }
}
