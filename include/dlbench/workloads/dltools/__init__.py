"""Study 001's deep-learning-tool training set (Xu, Shi, Chu, BigCom 2017, Table VII).

FCN5 on MNIST, AlexNet and ResNet-50 on CIFAR-10, a 2-layer LSTM on PTB, timed in seconds per
batch for the first and the second epoch. Architectures, data layout and every choice the paper
leaves open: docs/dltools.md.
"""
