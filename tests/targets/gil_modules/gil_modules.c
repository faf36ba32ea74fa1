/* One tiny extension module, built three times under three names (tests/integration/test_free_threading.py):
 *   -DMODNAME=gil_free     multi-phase init, {Py_mod_gil, Py_MOD_GIL_NOT_USED} in its slots (3.13+)
 *   -DMODNAME=gil_needed   multi-phase init, no Py_mod_gil slot: a free-threaded build turns the GIL on
 *   -DMODNAME=gil_single   -DSINGLE_PHASE: PyModule_Create, no slots at all
 *   -DMODNAME=gil_export   -DEXPORT (3.15+): PEP 793's PyModExport_, whose slots the module does not keep
 *   -DMODNAME=gil_torn     -DTORN_SLOTS: multi-phase, then points its definition's m_slots at an unmapped
 *                          address once executed (CPython reads them only while creating the module), as a
 *                          torn read would show it to gilty
 * Each defines answer() -> 42, so the target can check it imported the module it meant to. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define CAT(a, b) a##b
#define INIT_NAME(name) CAT(PyInit_, name)
#define STR(x) #x
#define NAME_OF(x) STR(x)

static PyObject *answer(PyObject *self, PyObject *unused) {
    return PyLong_FromLong(42);
}

static PyMethodDef methods[] = {
    {"answer", answer, METH_NOARGS, "42"},
    {NULL, NULL, 0, NULL},
};

#if defined(EXPORT)
#define EXPORT_NAME(name) CAT(PyModExport_, name)
PyMODEXPORT_FUNC EXPORT_NAME(MODNAME)(void) {
    PyABIInfo_VAR(abi);
    static PySlot slots[] = {
        PySlot_STATIC_DATA(Py_mod_abi, &abi),
        PySlot_DATA(Py_mod_name, NAME_OF(MODNAME)),
        PySlot_STATIC_DATA(Py_mod_methods, methods),
        PySlot_DATA(Py_mod_gil, Py_MOD_GIL_NOT_USED),
        PySlot_END,
    };
    return slots;
}
#elif defined(SINGLE_PHASE)
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, NAME_OF(MODNAME), NULL, -1, methods};

PyMODINIT_FUNC INIT_NAME(MODNAME)(void) {
    return PyModule_Create(&def);
}
#else
static struct PyModuleDef def;

static int exec_module(PyObject *m) {
#ifdef TORN_SLOTS
    /* The slot loop running this has its own cursor: changing the pointer does not touch it. */
    def.m_slots = (PyModuleDef_Slot *)0x10;
#endif
    return PyModule_AddIntConstant(m, "multi_phase", 1);
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, exec_module},
#if defined(DECLARE_NOT_USED) && defined(Py_mod_gil)
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, NAME_OF(MODNAME), NULL, 0, methods, slots};

PyMODINIT_FUNC INIT_NAME(MODNAME)(void) {
    return PyModuleDef_Init(&def);
}
#endif
