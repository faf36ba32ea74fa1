/* A known C call chain for native-stack tests: outer -> middle -> inner_spin.
 * inner_spin burns CPU for a while, releasing the GIL or holding it.
 * Built by the tests with -fno-inline -fno-optimize-sibling-calls so every call keeps its frame. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

__attribute__((noinline)) static unsigned long inner_spin(unsigned long rounds, int release)
{
    volatile unsigned long acc = 0;
    PyThreadState *saved = NULL;
    if (release)
        saved = PyEval_SaveThread();
    /* The whole spin loop on one line: the tests find it by its marker, as a native frame's line. */
    for (unsigned long i = 0; i < rounds; i++) acc += i ^ (acc >> 3); /* LINE:spin */
    if (release)
        PyEval_RestoreThread(saved);
    return acc;
}

__attribute__((noinline)) static unsigned long middle(unsigned long rounds, int release)
{
    unsigned long r = inner_spin(rounds, release); /* LINE:inner */
    return r + 1;
}

static PyObject *outer(PyObject *self, PyObject *args)
{
    unsigned long rounds;
    int release;
    if (!PyArg_ParseTuple(args, "kp", &rounds, &release))
        return NULL;
    unsigned long r = middle(rounds, release);
    return PyLong_FromUnsignedLong(r + 1);
}

static PyMethodDef methods[] = {
    {"outer", outer, METH_VARARGS, "outer(rounds, release_gil): outer -> middle -> inner_spin"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "native_chain", NULL, -1, methods};

PyMODINIT_FUNC PyInit_native_chain(void) { return PyModule_Create(&module); }
