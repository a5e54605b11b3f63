# REINFORCE as pytorch/examples reinforcement_learning/reinforce.py writes it: a tiny policy
# network, Categorical(probs) for the actions, the discounted returns normalised, the loss
# -log_prob * return, Adam.  The episode is fixed (states, actions, rewards) so that the
# compared output is deterministic; a sampled action is only checked to be a valid one.
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

torch.manual_seed(0)
gamma = 0.99
eps = 1e-6


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, 8)
        self.affine2 = nn.Linear(8, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)


policy = Policy()
with torch.no_grad():   # the same weights in both runs (their generators differ)
    for k, p in enumerate(policy.parameters()):
        p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) * (1 + 0.1 * k))
optimizer = optim.Adam(policy.parameters(), lr=1e-2)

STATES = [[0.02, -0.01, 0.03, 0.04], [0.5, 0.1, -0.2, 0.3], [-0.4, 0.2, 0.1, -0.6],
          [0.3, -0.5, 0.4, 0.2], [0.1, 0.6, -0.3, -0.1]]
ACTIONS = [1, 0, 0, 1, 1]
REWARDS = [1.0, 1.0, 0.0, 1.0, 2.0]


def select_action(state, action):
    state = torch.tensor(state).unsqueeze(0)
    probs = policy(state)
    m = Categorical(probs)
    sampled = m.sample()
    assert sampled.item() in (0, 1)
    action = torch.tensor([action])
    policy.saved_log_probs.append(m.log_prob(action))
    return m.entropy()


def finish_episode():
    R = 0
    policy_loss = []
    returns = []
    for r in policy.rewards[::-1]:
        R = r + gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, R in zip(policy.saved_log_probs, returns):
        policy_loss.append(-log_prob * R)
    optimizer.zero_grad()
    policy_loss = torch.cat(policy_loss).sum()
    policy_loss.backward()
    optimizer.step()
    del policy.rewards[:]
    del policy.saved_log_probs[:]
    return policy_loss.item()


losses, entropies = [], []
for episode in range(3):
    for state, action, reward in zip(STATES, ACTIONS, REWARDS):
        entropies.append(select_action(state, action).item())
        policy.rewards.append(reward)
    losses.append(finish_episode())

m = Categorical(logits=policy.affine2(F.relu(policy.affine1(torch.tensor(STATES)))))
RESULTS = {"losses": losses, "entropies": entropies,
           "final_log_probs": m.log_prob(torch.tensor(ACTIONS)).tolist(),
           "batch_shape": list(m.batch_shape), "weight": policy.affine2.weight.tolist()}
