"""NumPy scalars as local variables (py-spy's locals test): the main thread sleeps in
scalar_locals, whose variables are NumPy scalars of known values."""
import time

import numpy as np


def scalar_locals():
    flag = np.bool_(True)
    byte = np.byte(2)
    i8 = np.int8(3)
    i16 = np.int16(42)
    i32 = np.int32(43)
    i64 = np.int64(-44)
    u8 = np.uint8(45)
    u16 = np.uint16(46)
    u32 = np.uint32(7)
    u64 = np.uint64(2**64 - 1)
    f32 = np.float32(0.5)
    f32_inexact = np.float32(0.7)
    f64 = np.float64(0.7)
    half = np.float16(0.3)
    cplx = np.complex128(0.3 + 5j)
    print("ready", flush=True)
    while True:
        time.sleep(3600)  # LINE:sleep


scalar_locals()
