/* kiln._fastlaunch: the per-call path of kiln.Kernel(...) in C.
 *
 * An optional CPython extension, built against the limited API of CPython 3.11 (one abi3 build
 * for 3.11 and later). It defines one type, Launcher, which kiln/__init__.py mixes into Kernel
 * (class _ExtensionKernel(Launcher, Kernel)), so that `kernel(a, b, c, m, n, k)` goes straight to
 * Launcher's tp_call: no Python frame, no ctypes. It fills the argument array on the C stack
 * (a tensor's data_ptr(), an int, a float, each stored at its parameter's C type), finds the
 * caller's current CUDA stream, and calls kiln_kernel_launch through the address the package
 * took from the libkiln that ctypes loaded (this module links no libkiln).
 *
 * Only the common case is handled here; anything else is handed to the Kernel's Python helpers,
 * the very code the ctypes path runs (kiln/__init__.py), so both paths accept the same arguments
 * and raise the same errors: an argument count that does not match (_wrong_count), a tensor of
 * another dtype (_wrong_dtype), a pointer that is neither an int nor has data_ptr() (_address),
 * a scalar that is not an exact int or float, or is out of its type's range (_convert), a stream
 * that is neither None nor an int (_stream_value), a failed launch (_raise_status). */
#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x030B0000
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Refused by kiln/_capi.py when it finds another PROTOCOL: the two are built together. */
#define KILN_FASTLAUNCH_PROTOCOL 1
#define STACK_PARAMS 32

enum { KIND_POINTER = 0, KIND_SIGNED = 1, KIND_UNSIGNED = 2, KIND_FLOAT = 3 };

typedef int (*launch_fn)(void* kernel, void* const* args, size_t count, void* stream, int* route);

typedef struct {
  int kind;
  int size;               /* bytes of the C type: 1, 2, 4, 8 */
  long long lo;           /* KIND_SIGNED */
  unsigned long long hi;  /* KIND_SIGNED (as the positive bound) and KIND_UNSIGNED */
  PyObject* dtype;        /* the torch dtype a tensor must have (strong), NULL until resolved */
} param;

typedef struct {
  PyObject_HEAD
  launch_fn fn;
  void* handle;
  Py_ssize_t count;
  param* params;
  int torch_resolved;
  PyObject* current_stream;  /* torch._C._cuda_getCurrentRawStream or its fallback (strong) */
  PyObject* references;      /* the runtime's set of kernels with a Python reference (strong) */
  PyObject* name;            /* this kernel's name (str) */
  PyObject* call_local;      /* kiln._call, the thread-local the reference trampoline reads */
  PyObject* routes;          /* tuple: index = kiln_route, value = its name */
} Launcher;

static PyObject *s_data_ptr, *s_dtype, *s_get_device, *s_args, *s_error, *s_expected, *s_current_stream,
    *s_torch_types, *s_wrong_count, *s_wrong_dtype, *s_address, *s_convert, *s_stream_value, *s_raise_status,
    *s_stream;

static int launcher_clear(PyObject* o) {
  Launcher* self = (Launcher*)o;
  if (self->params) {
    for (Py_ssize_t i = 0; i < self->count; i++) Py_CLEAR(self->params[i].dtype);
  }
  Py_CLEAR(self->current_stream);
  Py_CLEAR(self->references);
  Py_CLEAR(self->name);
  Py_CLEAR(self->call_local);
  Py_CLEAR(self->routes);
  return 0;
}

static int launcher_traverse(PyObject* o, visitproc visit, void* arg) {
  Launcher* self = (Launcher*)o;
  Py_VISIT(Py_TYPE(o));
  if (self->params) {
    for (Py_ssize_t i = 0; i < self->count; i++) Py_VISIT(self->params[i].dtype);
  }
  Py_VISIT(self->current_stream);
  Py_VISIT(self->references);
  Py_VISIT(self->name);
  Py_VISIT(self->call_local);
  Py_VISIT(self->routes);
  return 0;
}

static void launcher_dealloc(PyObject* o) {
  PyTypeObject* type = Py_TYPE(o);
  PyObject_GC_UnTrack(o);
  launcher_clear(o);
  PyMem_Free(((Launcher*)o)->params);
  ((Launcher*)o)->params = NULL;
  freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
  tp_free(o);
  Py_DECREF(type);
}

/* _setup(launch_address, handle, spec, references, name, call_local, routes)
 * spec: one (kind, size, lo, hi) tuple per parameter. */
static PyObject* launcher_setup(PyObject* o, PyObject* args) {
  Launcher* self = (Launcher*)o;
  PyObject *fn, *handle, *spec, *references, *name, *call_local, *routes;
  if (!PyArg_ParseTuple(args, "OOO!O!UOO!:_setup", &fn, &handle, &PyTuple_Type, &spec, &PySet_Type, &references,
                        &name, &call_local, &PyTuple_Type, &routes))
    return NULL;
  void* fn_address = PyLong_AsVoidPtr(fn);
  if (!fn_address) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "_setup: the launch function's address is NULL");
    return NULL;
  }
  void* handle_address = PyLong_AsVoidPtr(handle);
  if (!handle_address && PyErr_Occurred()) return NULL;
  Py_ssize_t count = PyTuple_Size(spec);
  param* params = PyMem_Calloc(count ? (size_t)count : 1, sizeof(param));
  if (!params) return PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < count; i++) {
    PyObject* p = PyTuple_GetItem(spec, i);
    long long lo = 0;
    unsigned long long hi = 0;
    if (!p || !PyArg_ParseTuple(p, "iiLK", &params[i].kind, &params[i].size, &lo, &hi)) {
      PyMem_Free(params);
      return NULL;
    }
    params[i].lo = lo;
    params[i].hi = hi;
    if (params[i].kind < KIND_POINTER || params[i].kind > KIND_FLOAT ||
        (params[i].size != 1 && params[i].size != 2 && params[i].size != 4 && params[i].size != 8) ||
        (params[i].kind == KIND_POINTER && params[i].size != 8) ||
        (params[i].kind == KIND_FLOAT && params[i].size != 4 && params[i].size != 8)) {
      PyMem_Free(params);
      PyErr_Format(PyExc_ValueError, "_setup: parameter %zd: kind %d of %d bytes is not one this module knows",
                   i, params[i].kind, params[i].size);
      return NULL;
    }
  }
  launcher_clear(o);
  PyMem_Free(self->params);
  self->fn = (launch_fn)fn_address;
  self->handle = handle_address;
  self->count = count;
  self->params = params;
  self->torch_resolved = 0;
  Py_INCREF(references);
  self->references = references;
  Py_INCREF(name);
  self->name = name;
  Py_INCREF(call_local);
  self->call_local = call_local;
  Py_INCREF(routes);
  self->routes = routes;
  Py_RETURN_NONE;
}

/* Reads the torch dtypes and the current-stream getter the Kernel resolved (_torch_types). */
static int resolve_torch(Launcher* self) {
  PyObject* r = PyObject_CallMethodObjArgs((PyObject*)self, s_torch_types, NULL);
  if (!r) return -1;
  Py_DECREF(r);
  PyObject* expected = PyObject_GetAttr((PyObject*)self, s_expected);
  if (!expected) return -1;
  PyObject* getter = PyObject_GetAttr((PyObject*)self, s_current_stream);
  if (!getter) {
    Py_DECREF(expected);
    return -1;
  }
  if (PySequence_Size(expected) != self->count) {
    Py_DECREF(expected);
    Py_DECREF(getter);
    PyErr_SetString(PyExc_RuntimeError, "kiln._fastlaunch: _expected does not have one entry per parameter");
    return -1;
  }
  for (Py_ssize_t i = 0; i < self->count; i++) {
    PyObject* d = PySequence_GetItem(expected, i);
    if (!d) {
      Py_DECREF(expected);
      Py_DECREF(getter);
      return -1;
    }
    Py_XDECREF(self->params[i].dtype);
    self->params[i].dtype = d;
  }
  Py_DECREF(expected);
  Py_XDECREF(self->current_stream);
  self->current_stream = getter;
  self->torch_resolved = 1;
  return 0;
}

static void store(void* slot, const param* p, unsigned long long bits) {
  switch (p->size) {
    case 1: { uint8_t v = (uint8_t)bits; memcpy(slot, &v, 1); break; }
    case 2: { uint16_t v = (uint16_t)bits; memcpy(slot, &v, 2); break; }
    case 4: { uint32_t v = (uint32_t)bits; memcpy(slot, &v, 4); break; }
    default: memcpy(slot, &bits, 8); break;
  }
}

/* Stores a scalar the Python side converted (an int in range, or a float). */
static int store_converted(void* slot, const param* p, PyObject* v) {
  if (p->kind == KIND_FLOAT) {
    double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) return -1;
    if (p->size == 4) {
      float f = (float)d;
      memcpy(slot, &f, 4);
    } else {
      memcpy(slot, &d, 8);
    }
    return 0;
  }
  unsigned long long bits = PyLong_AsUnsignedLongLongMask(v);
  if (bits == (unsigned long long)-1 && PyErr_Occurred()) return -1;
  store(slot, p, bits);
  return 0;
}

/* The slow path for argument i: a Python helper of the Kernel converts (or raises). */
static int convert_in_python(Launcher* self, PyObject* helper, Py_ssize_t i, PyObject* value, void* slot) {
  PyObject* index = PyLong_FromSsize_t(i);
  if (!index) return -1;
  PyObject* v = PyObject_CallMethodObjArgs((PyObject*)self, helper, index, value, NULL);
  Py_DECREF(index);
  if (!v) return -1;
  int rc = store_converted(slot, &self->params[i], v);
  Py_DECREF(v);
  return rc;
}

static int call_helper_raising(Launcher* self, PyObject* helper, PyObject* a, PyObject* b) {
  PyObject* r = PyObject_CallMethodObjArgs((PyObject*)self, helper, a, b, NULL);
  if (r) {  /* the helpers raise; one that returned is a bug there */
    Py_DECREF(r);
    PyErr_SetString(PyExc_RuntimeError, "kiln._fastlaunch: an error helper returned instead of raising");
  }
  return -1;
}

/* Fills argument i. *cuda_device: the device of the first tensor (-1 before one is seen). */
static int fill(Launcher* self, Py_ssize_t i, PyObject* value, void* slot, long* cuda_device) {
  const param* p = &self->params[i];
  if (p->kind == KIND_POINTER) {
    if (PyLong_CheckExact(value)) {
      unsigned long long bits = PyLong_AsUnsignedLongLongMask(value);
      if (bits == (unsigned long long)-1 && PyErr_Occurred()) return -1;
      memcpy(slot, &bits, 8);
      return 0;
    }
    /* data_ptr() called as a method (no bound method object made), before the dtype check, as the
       ctypes path does. An object without one is not a tensor and goes to the Python helpers; an
       AttributeError raised inside one is the caller's, as on the ctypes path. */
    PyObject* address = PyObject_CallMethodObjArgs(value, s_data_ptr, NULL);
    if (!address) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
      PyObject *type, *error, *traceback;
      PyErr_Fetch(&type, &error, &traceback);
      if (PyObject_HasAttr(value, s_data_ptr)) {
        PyErr_Restore(type, error, traceback);
        return -1;
      }
      Py_XDECREF(type);
      Py_XDECREF(error);
      Py_XDECREF(traceback);
      if (PyLong_Check(value)) return convert_in_python(self, s_convert, i, value, slot);
      return convert_in_python(self, s_address, i, value, slot);  /* arrays, ctypes objects, or the error */
    }
    /* A tensor: its dtype must be the parameter's, its device gives the current stream. */
    if (!self->torch_resolved && resolve_torch(self) < 0) {
      Py_DECREF(address);
      return -1;
    }
    PyObject* dtype = PyObject_GetAttr(value, s_dtype);
    if (!dtype) {
      Py_DECREF(address);
      return -1;
    }
    Py_DECREF(dtype);  /* only its identity is compared */
    if (dtype != p->dtype) {
      Py_DECREF(address);
      PyObject* index = PyLong_FromSsize_t(i);
      if (!index) return -1;
      call_helper_raising(self, s_wrong_dtype, index, value);
      Py_DECREF(index);
      return -1;
    }
    if (*cuda_device < 0) {
      PyObject* device = PyObject_CallMethodObjArgs(value, s_get_device, NULL);
      if (!device) {
        Py_DECREF(address);
        return -1;
      }
      *cuda_device = PyLong_AsLong(device);
      Py_DECREF(device);
      if (*cuda_device == -1 && PyErr_Occurred()) {
        Py_DECREF(address);
        return -1;
      }
    }
    int rc;
    if (PyLong_CheckExact(address)) {
      unsigned long long bits = PyLong_AsUnsignedLongLongMask(address);
      rc = (bits == (unsigned long long)-1 && PyErr_Occurred()) ? -1 : 0;
      if (rc == 0) memcpy(slot, &bits, 8);
    } else {
      rc = convert_in_python(self, s_convert, i, address, slot);
    }
    Py_DECREF(address);
    return rc;
  }
  if (p->kind == KIND_FLOAT) {
    /* PyFloat_AsDouble, as ctypes' own setter: an int too large for a double raises the same error */
    if (!PyFloat_CheckExact(value) && !PyLong_CheckExact(value)) return convert_in_python(self, s_convert, i, value, slot);
    return store_converted(slot, p, value);
  }
  if (!PyLong_CheckExact(value)) return convert_in_python(self, s_convert, i, value, slot);
  if (p->kind == KIND_SIGNED) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || v < p->lo || (v > 0 && (unsigned long long)v > p->hi))
      return convert_in_python(self, s_convert, i, value, slot);  /* raises the range error */
    store(slot, p, (unsigned long long)v);
    return 0;
  }
  unsigned long long v = PyLong_AsUnsignedLongLong(value);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
    PyErr_Clear();  /* negative or too large */
    return convert_in_python(self, s_convert, i, value, slot);
  }
  if (v > p->hi) return convert_in_python(self, s_convert, i, value, slot);
  store(slot, p, v);
  return 0;
}

static int stream_address(Launcher* self, PyObject* stream, void** out) {
  if (stream == Py_None) {
    *out = NULL;
    return 0;
  }
  PyObject* owned = NULL;
  if (!PyLong_CheckExact(stream)) {
    owned = PyObject_CallMethodObjArgs((PyObject*)self, s_stream_value, stream, NULL);
    if (!owned) return -1;
    stream = owned;
  }
  unsigned long long bits = PyLong_AsUnsignedLongLongMask(stream);
  Py_XDECREF(owned);
  if (bits == (unsigned long long)-1 && PyErr_Occurred()) return -1;
  *out = (void*)(uintptr_t)bits;
  return 0;
}

/* Launches with the GIL released, as ctypes does around a foreign call. */
static int do_launch(Launcher* self, void* const* argv, void* stream, int* route) {
  int status;
  PyThreadState* saved = PyEval_SaveThread();
  status = self->fn(self->handle, argv, (size_t)self->count, stream, route);
  PyEval_RestoreThread(saved);
  return status;
}

static PyObject* launcher_call(PyObject* o, PyObject* args, PyObject* kwargs) {
  Launcher* self = (Launcher*)o;
  if (!self->params) {
    PyErr_SetString(PyExc_RuntimeError, "kiln._fastlaunch.Launcher: not set up (_setup was not called)");
    return NULL;
  }
  PyObject* stream = Py_None;
  if (kwargs && PyDict_Size(kwargs) > 0) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      int is_stream = PyUnicode_Check(key) ? PyUnicode_Compare(key, s_stream) == 0 : 0;
      if (!is_stream) {
        PyErr_Format(PyExc_TypeError, "Kernel.__call__() got an unexpected keyword argument '%S'", key);
        return NULL;
      }
      stream = value;
    }
  }
  Py_ssize_t n = PyTuple_Size(args);
  if (n != self->count) {
    call_helper_raising(self, s_wrong_count, args, NULL);
    return NULL;
  }
  uint64_t slots_stack[STACK_PARAMS];
  void* argv_stack[STACK_PARAMS];
  uint64_t* slots = slots_stack;
  void** argv = argv_stack;
  if (n > STACK_PARAMS) {
    slots = PyMem_Malloc((size_t)n * sizeof(uint64_t));
    argv = PyMem_Malloc((size_t)n * sizeof(void*));
    if (!slots || !argv) {
      PyMem_Free(slots);
      PyMem_Free(argv);
      return PyErr_NoMemory();
    }
  }
  PyObject* result = NULL;
  long cuda_device = -1;
  for (Py_ssize_t i = 0; i < n; i++) {
    slots[i] = 0;
    argv[i] = &slots[i];
    if (fill(self, i, PyTuple_GetItem(args, i), &slots[i], &cuda_device) < 0) goto done;
  }
  void* stream_ptr = NULL;
  if (stream == Py_None && cuda_device >= 0) {
    PyObject* device = PyLong_FromLong(cuda_device);
    if (!device) goto done;
    PyObject* current = PyObject_CallFunctionObjArgs(self->current_stream, device, NULL);
    Py_DECREF(device);
    if (!current) goto done;
    int rc = stream_address(self, current, &stream_ptr);
    Py_DECREF(current);
    if (rc < 0) goto done;
  } else if (stream_address(self, stream, &stream_ptr) < 0) {
    goto done;
  }
  int route = 0, status;
  int has_reference = PySet_Contains(self->references, self->name);
  if (has_reference < 0) goto done;
  if (!has_reference) {
    status = do_launch(self, (void* const*)argv, stream_ptr, &route);
  } else {
    /* A Python reference may run: it gets the call's own arguments through kiln._call. */
    if (PyObject_SetAttr(self->call_local, s_args, args) < 0) goto done;
    status = do_launch(self, (void* const*)argv, stream_ptr, &route);
    if (PyObject_SetAttr(self->call_local, s_args, Py_None) < 0) goto done;
    PyObject* error = PyObject_GetAttr(self->call_local, s_error);
    if (!error) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) goto done;
      PyErr_Clear();
    } else if (error == Py_None) {
      Py_DECREF(error);
    } else {
      if (PyObject_SetAttr(self->call_local, s_error, Py_None) < 0) {
        Py_DECREF(error);
        goto done;
      }
      /* Raised as `raise error` does: its own type, value and traceback. */
      PyObject* type = PyExceptionInstance_Class(error);
      Py_INCREF(type);
      PyErr_Restore(type, error, PyException_GetTraceback(error));
      goto done;
    }
  }
  if (status) {
    PyObject* code = PyLong_FromLong(status);
    if (!code) goto done;
    PyObject* r = PyObject_CallMethodObjArgs(o, s_raise_status, code, NULL);
    Py_DECREF(code);
    if (!r) goto done;
    Py_DECREF(r);
  }
  if (route >= 0 && route < PyTuple_Size(self->routes) && PyTuple_GetItem(self->routes, route) != Py_None) {
    result = PyTuple_GetItem(self->routes, route);
    Py_INCREF(result);
  } else {
    PyObject* key = PyLong_FromLong(route);
    if (key) {
      PyErr_SetObject(PyExc_KeyError, key);
      Py_DECREF(key);
    }
  }
done:
  if (slots != slots_stack) {
    PyMem_Free(slots);
    PyMem_Free(argv);
  }
  return result;
}

static PyMethodDef launcher_methods[] = {
    {"_setup", launcher_setup, METH_VARARGS,
     "_setup(launch_address, handle, spec, references, name, call_local, routes): what calls need"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot launcher_slots[] = {
    {Py_tp_doc, (void*)"The per-call path of kiln.Kernel in C; mixed into Kernel by kiln/__init__.py."},
    {Py_tp_new, (void*)PyType_GenericNew},
    {Py_tp_dealloc, (void*)launcher_dealloc},
    {Py_tp_traverse, (void*)launcher_traverse},
    {Py_tp_clear, (void*)launcher_clear},
    {Py_tp_call, (void*)launcher_call},
    {Py_tp_methods, (void*)launcher_methods},
    {0, NULL},
};

static PyType_Spec launcher_spec = {
    "kiln._fastlaunch.Launcher", sizeof(Launcher), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, launcher_slots,
};

static int intern_all(void) {
#define INTERN(var, text) if (!(var = PyUnicode_InternFromString(text))) return -1
  INTERN(s_data_ptr, "data_ptr");
  INTERN(s_dtype, "dtype");
  INTERN(s_get_device, "get_device");
  INTERN(s_args, "args");
  INTERN(s_error, "error");
  INTERN(s_expected, "_expected");
  INTERN(s_current_stream, "_current_stream");
  INTERN(s_torch_types, "_torch_types");
  INTERN(s_wrong_count, "_wrong_count");
  INTERN(s_wrong_dtype, "_wrong_dtype");
  INTERN(s_address, "_address");
  INTERN(s_convert, "_convert");
  INTERN(s_stream_value, "_stream_value");
  INTERN(s_raise_status, "_raise_status");
  INTERN(s_stream, "stream");
#undef INTERN
  return 0;
}

static int module_exec(PyObject* module) {
  if (intern_all() < 0) return -1;
  PyObject* type = PyType_FromSpec(&launcher_spec);
  if (!type) return -1;
  if (PyModule_AddObject(module, "Launcher", type) < 0) {
    Py_DECREF(type);
    return -1;
  }
  if (PyModule_AddIntConstant(module, "PROTOCOL", KILN_FASTLAUNCH_PROTOCOL) < 0) return -1;
  if (PyModule_AddIntConstant(module, "KIND_POINTER", KIND_POINTER) < 0 ||
      PyModule_AddIntConstant(module, "KIND_SIGNED", KIND_SIGNED) < 0 ||
      PyModule_AddIntConstant(module, "KIND_UNSIGNED", KIND_UNSIGNED) < 0 ||
      PyModule_AddIntConstant(module, "KIND_FLOAT", KIND_FLOAT) < 0)
    return -1;
  return 0;
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, (void*)module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_fastlaunch",
    "kiln.Kernel's per-call path in C (optional: kiln falls back to ctypes without it)",
    0, NULL, module_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastlaunch(void) { return PyModuleDef_Init(&module_def); }
