// The library the tests' precompiled header is made for (CMakeLists.txt, CHRONICLE_TEST_PCH).
