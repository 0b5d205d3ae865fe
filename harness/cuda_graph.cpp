// CUDA graph capture for parlab's decode step: libtorch's at::cuda::CUDAGraph behind a C ABI,
// which tch does not expose. Capture needs the thread's current stream to be a side stream
// (never the default one) while libtorch's operators are issued from Rust, and the caching
// allocator in capture mode with the graph's private memory pool: CUDAGraph does the latter,
// these functions the former. Every function catches what libtorch throws and returns it as a
// malloc'ed message (null on success), which the caller frees.
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <vector>

// The CUDA runtime functions libtorch's inline code calls. The runtime is the one libtorch_cuda
// loads (found through its own RUNPATH, not the executable's), so these are bound at load time
// from the process's global scope: weak here, the link of parlab needs no libcudart of its own
// (build.rs refuses the shim if another strong cuda* reference appears).
#pragma weak cudaDeviceSynchronize
#pragma weak cudaEventCreateWithFlags
#pragma weak cudaEventDestroy
#pragma weak cudaEventElapsedTime
#pragma weak cudaEventQuery
#pragma weak cudaEventRecord
#pragma weak cudaEventSynchronize
#pragma weak cudaGetErrorString
#pragma weak cudaGetLastError
#pragma weak cudaGraphGetNodes
#pragma weak cudaGraphNodeGetType
#pragma weak cudaStreamIsCapturing
#pragma weak cudaStreamWaitEvent

struct ParlabGraph {
  c10::DeviceIndex device;
  at::cuda::CUDAGraph graph;
  c10::cuda::CUDAStream side;
  std::optional<c10::cuda::CUDAStream> before;

  // keep_graph: the captured cudaGraph_t stays readable after instantiation (its nodes are counted).
  explicit ParlabGraph(c10::DeviceIndex d)
      : device(d), graph(/*keep_graph=*/true), side(c10::cuda::getStreamFromPool(false, d)) {}
};

template <typename F>
static char* guarded(F body) {
  try {
    body();
    return nullptr;
  } catch (const std::exception& e) {
    return strdup(e.what());
  } catch (...) {
    return strdup("an unknown C++ exception");
  }
}

extern "C" {

// A graph for CUDA device `device`, with its own side stream; *out is null on failure.
char* parlab_graph_new(int device, ParlabGraph** out) {
  *out = nullptr;
  // The weak references are bound from the runtime libtorch_cuda loaded; unbound, a call would
  // jump to address 0.
  if (&cudaGetLastError == nullptr || &cudaGraphGetNodes == nullptr || &cudaGraphNodeGetType == nullptr ||
      &cudaDeviceSynchronize == nullptr) {
    return strdup("the CUDA runtime's functions are not bound in this process (libtorch_cuda's libcudart not loaded)");
  }
  return guarded([&] {
    c10::cuda::CUDAGuard on(static_cast<c10::DeviceIndex>(device));
    *out = new ParlabGraph(static_cast<c10::DeviceIndex>(device));
  });
}

// Makes the graph's side stream the thread's current stream, once the device is idle (so work
// issued before is ordered before whatever runs on the side stream).
char* parlab_graph_enter(ParlabGraph* g) {
  return guarded([&] {
    c10::cuda::CUDAGuard on(g->device);
    c10::cuda::device_synchronize();
    g->before = c10::cuda::getCurrentCUDAStream(g->device);
    c10::cuda::setCurrentCUDAStream(g->side);
  });
}

// Restores the stream current before parlab_graph_enter (first, so that it is restored even if
// the wait fails), then waits for the side stream's work.
char* parlab_graph_leave(ParlabGraph* g) {
  return guarded([&] {
    c10::cuda::CUDAGuard on(g->device);
    if (g->before) {
      c10::cuda::setCurrentCUDAStream(*g->before);
      g->before.reset();
    }
    c10::cuda::device_synchronize();
  });
}

// Starts capturing the work issued on the current (side) stream into the graph.
char* parlab_graph_capture_begin(ParlabGraph* g) {
  return guarded([&] {
    c10::cuda::CUDAGuard on(g->device);
    g->graph.capture_begin();
  });
}

// Ends the capture and instantiates the graph.
char* parlab_graph_capture_end(ParlabGraph* g) {
  return guarded([&] {
    c10::cuda::CUDAGuard on(g->device);
    g->graph.capture_end();
    g->graph.instantiate();
  });
}

// The captured graph's kernel nodes and all its nodes (kernels, copies, sets, ...).
char* parlab_graph_nodes(ParlabGraph* g, size_t* kernels, size_t* all) {
  return guarded([&] {
    cudaGraph_t raw = g->graph.raw_cuda_graph();
    size_t n = 0;
    C10_CUDA_CHECK(cudaGraphGetNodes(raw, nullptr, &n));
    std::vector<cudaGraphNode_t> nodes(n);
    C10_CUDA_CHECK(cudaGraphGetNodes(raw, nodes.data(), &n));
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
      cudaGraphNodeType type;
      C10_CUDA_CHECK(cudaGraphNodeGetType(nodes[i], &type));
      k += type == cudaGraphNodeTypeKernel;
    }
    *kernels = k;
    *all = n;
  });
}

// Launches the captured work once on the current stream (not waiting for it).
char* parlab_graph_replay(ParlabGraph* g) {
  return guarded([&] {
    c10::cuda::CUDAGuard on(g->device);
    g->graph.replay();
  });
}

// Frees the graph (its memory pool is released once the tensors allocated in it are).
void parlab_graph_free(ParlabGraph* g) {
  try {
    delete g;
  } catch (...) {
  }
}

}  // extern "C"
