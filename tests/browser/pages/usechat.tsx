// useChat with AI SDK v6 (ai@6, @ai-sdk/react 3): the page itself is common_usechat.tsx.
import { useChat } from "@ai-sdk/react";
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from "ai";

import { mount } from "./common_usechat";

mount({ useChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses,
        lastAssistantMessageIsCompleteWithToolCalls }, "usechat");
