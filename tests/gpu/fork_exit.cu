// fork_exit.cu: a CUDA program that forks without exec and lets the child
// call exit(), so the child runs the exit handlers it inherited (flare's
// among them) although none of the parent's threads exist in it. Under
// flare trace the child must exit at once and the parent finish normally.
// Exits 0 when the child ended by itself within 20 s with status 0 and the
// parent's own kernel result is right; 1 otherwise (a hung child is killed).
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

__global__ void fill_kernel(int *data, int value)
{
    data[threadIdx.x] = value;
}

int main()
{
    int *data = nullptr;
    if (cudaMalloc(&data, 32 * sizeof(int)) != cudaSuccess)
        return 2;
    fill_kernel<<<1, 32>>>(data, 7);
    cudaDeviceSynchronize();
    pid_t child = fork();
    if (child < 0)
        return 2;
    if (child == 0)
        exit(0); // the inherited exit handlers run here; CUDA is not touched
    int status = 0;
    int waited = 0;
    while (waitpid(child, &status, WNOHANG) == 0) {
        if (++waited > 200) { // 20 s
            fprintf(stderr, "fork_exit: the child did not exit within 20 s (hung in an exit "
                            "handler); killing it\n");
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            return 1;
        }
        usleep(100000);
    }
    int host[32];
    fill_kernel<<<1, 32>>>(data, 9);
    cudaMemcpy(host, data, sizeof(host), cudaMemcpyDeviceToHost);
    cudaFree(data);
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && host[0] == 9 && host[31] == 9;
    printf("fork_exit: child %s, parent result %s\n",
           WIFEXITED(status) ? "exited" : "killed by a signal", ok ? "right" : "wrong");
    return ok ? 0 : 1;
}
